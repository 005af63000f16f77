"""Any model family's evaluate job: `python -m conceptual.jobs.evaluate --family NAME [its arguments]`
(`--family captioner` is `conceptual.jobs.evaluate_captioner`; the family names stay too)."""

from conceptual.jobs import family_verb

main = family_verb("evaluate")

if __name__ == "__main__":
    raise SystemExit(main())
