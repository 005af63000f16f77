"""One thin entry point per stage: `python -m conceptual.jobs.<stage> --help`."""
