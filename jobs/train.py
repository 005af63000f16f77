"""Any model family's train job: `python -m conceptual.jobs.train --family NAME [its arguments]`
(`--family captioner` is `conceptual.jobs.train_captioner`; the family names stay too)."""

from conceptual.jobs import family_verb

main = family_verb("train")

if __name__ == "__main__":
    raise SystemExit(main())
