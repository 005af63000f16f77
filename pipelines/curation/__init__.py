"""Harvest and curation: web archives to candidates, candidates through the funnel to
curated records (the stages, the global rules, the report), and what judges a curation."""
