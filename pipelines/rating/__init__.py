"""People in the loop: rating task sets, their human tables, and splits cleaned by raters."""
