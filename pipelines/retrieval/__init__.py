"""The retrieval index of a trained dual encoder."""
