"""The attend family: a Show, Attend and Tell captioner (train_attend.py), trained, evaluated
and served through the captioner family's code and command lines, saved as its own kind."""
