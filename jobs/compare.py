"""Any model family's compare job: `python -m conceptual.jobs.compare --family NAME [its arguments]`
(`--family captioner` is `conceptual.jobs.compare_captioner`; the family names stay too)."""

from conceptual.jobs import family_verb

main = family_verb("compare")

if __name__ == "__main__":
    raise SystemExit(main())
