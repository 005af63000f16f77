"""The contrastive family: the retriever's code under a CLIP-style objective."""
