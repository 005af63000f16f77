"""Ray compositions of the core building blocks: Data pipelines and Train trainers."""
