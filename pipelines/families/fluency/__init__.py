"""The fluency family: its classifier's recipe and evaluation, and the comparison of the
approaches to captioning in another language."""
