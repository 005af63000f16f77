"""Captioning models, engine-agnostic: vocabulary, RNN and Transformer captioners, decoding, save format."""
