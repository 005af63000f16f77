"""The contrastive family: the retriever's code under a CLIP-style objective, saved,
evaluated, indexed and served as a dual encoder (its jobs run the retriever's command lines)."""
