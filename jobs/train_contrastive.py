"""The contrastive family's train job, `conceptual.jobs.train --family contrastive`: the
retriever's code run for it by the family table (conceptual.pipelines.families)."""

from conceptual.jobs import registry_job

main = registry_job("train_contrastive")

if __name__ == "__main__":
    raise SystemExit(main())
