"""The captioner family: its recipe, its evaluation, its comparison of the four variants."""
