"""Ray compositions of the core building blocks, one package per system in the order data
flows: curation (with the harvest), features, training, evaluation, the model families,
retrieval (the index) and rating; dataflow holds what every Ray Data job shares, and
pipeline.py runs the systems' steps in order as one job (docs/architecture.md)."""
