"""Text building blocks: filters, normalization, hypernymization."""
