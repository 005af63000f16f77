"""The dual-encoder family: its data, its recipe, its evaluation, its comparison."""
