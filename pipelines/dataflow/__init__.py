"""The Ray Data machinery every data job shares: a pipeline as a list of steps, the rows in
flight and their quarantine, actor pools, the journal a killed run resumes from, readers."""
