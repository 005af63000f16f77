"""Scoring any family's model on held-out data, and variants of a family trained and scored
side by side."""
