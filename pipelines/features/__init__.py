"""What the models read, made from curated records: CNN features, spoken captions,
translated captions and their fluency scores."""
