"""Publish curated records as a Hugging Face dataset, with a dataset card written from the run.

    python -m conceptual.jobs.publish_dataset --data URI --output URI [--name NAME]
        [--images urls|embed] [--format hub|tsv] [--config FILE] [key=value ...]

DATA is a curation or import output (or its curated/ folder). OUTPUT gets README.md (the
card: YAML header, splits, fields, an instance, the curation funnel, the hypernymization
figures, the configuration and MLflow runs) and data/{split}-NNNNN-of-NNNNN.parquet, which
`datasets.load_dataset(OUTPUT)` loads with the splits train, validation and test. Records
with labels are published as the released card has them: configs `unlabeled` (the default)
and `labeled` (`datasets.load_dataset(OUTPUT, "labeled")`). --format tsv also writes each
split as the released TSV (caption<TAB>url) under OUTPUT/tsv/. The license is never guessed:
set it with license=... (the job warns without one).
"""

from __future__ import annotations

import json
import sys

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments
from conceptual.jobs.runner import job_main, job_run, report_run


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("publish_dataset", __doc__, keys="publish_dataset.yaml")
    add_data_arguments(parser, "where README.md and data/ go")
    add_config(parser, "PublishConfig", "license=cc-by-4.0")
    parser.add_argument("--name", help="the dataset's name on its card (key name=)")
    parser.add_argument(
        "--images",
        choices=["urls", "embed"],
        help="urls (the default), or embed the curated JPEGs as an Image column (key images=)",
    )
    parser.add_argument(
        "--format",
        choices=["hub", "tsv"],
        help="hub (the default), or tsv: also the released TSV of each split (key format=)",
    )
    args = parser.parse_args(argv)
    with job_run("publish_dataset", args.verbose, output=args.output) as log:
        from conceptual import storage
        from conceptual.config import load
        from conceptual.publishing import CARD, DATA, PublishConfig, publish

        config = load(PublishConfig, args.config, args.overrides)
        chosen = {"name": args.name, "images": args.images, "format": args.format}
        config = config.model_copy(update={k: v for k, v in chosen.items() if v is not None})
        if not config.license:
            print(
                "warning:  no license set: the card says it must be set before the dataset is "
                "shared (license=... names it; the platform does not guess one)",
                flush=True,
            )
        result = publish(args.data, args.output, config)
    print(json.dumps({"splits": result["splits"], "configs": result["configs"]}, indent=2))
    print(f"data:     {storage.join(args.output, DATA)}  (digest {result['digest']})")
    print(f"card:     {storage.join(args.output, CARD)}")
    for name in result["configs"]:
        chosen = "" if len(result["configs"]) == 1 else f", {name!r}"
        print(f"load:     datasets.load_dataset({args.output!r}{chosen})")
    if tsv := result["tsv"]:
        left = sum(tsv["left_out"].values())
        note = f"; {left} rows with a tab or line break left out" if left else ""
        print(f"tsv:      {', '.join(tsv['files'].values())} (caption<TAB>url{note})")
    report_run(result["run_id"], config.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
