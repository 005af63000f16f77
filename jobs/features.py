"""Extract CNN features of a curated dataset for the captioning and retrieval models.

    python -m conceptual.jobs.features --data URI --output URI [--config FILE] [key=value ...]

DATA is a curation output (or its curated/ folder). OUTPUT gets features/*.parquet (one row
per image and crop: id, split, caption, pooled, grid), features.json and _SUCCESS, and
rejected/*.parquet with the records whose processing raised (reason internal_error; more
than errors.max_rate of them, or errors.max_count, fails the job).
Overrides use the config's dotted keys, e.g. crops=4 image_size=256 cnn.precision=bf16.
"""

from __future__ import annotations

import json
import sys

from conceptual.jobs.arguments import (
    JobParser,
    add_data_arguments,
    job_main,
    report_run,
    run_data_job,
)


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser(
        prog="python -m conceptual.jobs.features", description=__doc__.split("\n\n")[0]
    )
    add_data_arguments(
        parser,
        "--data",
        "a curation output or its curated/ folder",
        "where features/ and features.json go",
        "features.yaml",
    )
    args = parser.parse_args(argv)
    from conceptual import storage
    from conceptual.pipelines.features import FeaturesConfig, run

    config, (summary, run_id), log = run_data_job("features", args, args.data, FeaturesConfig, run)
    print(json.dumps(summary, indent=2))
    if summary["rows"]:
        print(f"features: {storage.join(args.output, 'features')}  ({summary['rows']} rows)")
    else:
        print(
            f"features: none: no record of {args.data} carries an image "
            "(a text-only curation, with_images=false, has none)"
        )
    if failed := sum(sum(reasons.values()) for reasons in summary["rejected"].values()):
        print(f"rejected: {storage.join(args.output, 'rejected')}  ({failed} internal errors)")
    report_run(run_id, config.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
