"""Engine-agnostic image building blocks: fetching, image filters, the ImageNet classifier, label overlap, CNN features."""
