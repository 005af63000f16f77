"""conceptual: the Conceptual Captions system rebuilt on Ray."""

__version__ = "0.1.0"
