"""Extract CNN features of a curated dataset for the captioning and retrieval models.

    python -m conceptual.jobs.features --data URI --output URI [--config FILE] [key=value ...]

DATA is a curation output (or its curated/ folder). OUTPUT gets features/*.parquet (one row
per image and crop: id, split, caption, pooled, grid), features.json and _SUCCESS, and
rejected/*.parquet with the records whose processing raised (reason internal_error; more
than errors.max_rate of them, or errors.max_count, fails the job).
Overrides use the config's dotted keys, e.g. crops=4 image_size=256 cnn.precision=bf16.
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments
from conceptual.jobs.runner import job_main, print_rejected, run_data_job


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("features", __doc__, keys="features.yaml")
    add_data_arguments(parser, "where features/ and features.json go")
    add_config(parser, "FeaturesConfig", "crops=4 cnn.precision=bf16")
    args = parser.parse_args(argv)
    from conceptual import storage
    from conceptual.pipelines.features.features import FeaturesConfig, described, run

    def show(summary: dict, config: FeaturesConfig) -> None:
        print(described(summary))
        if summary["rows"]:
            print(f"features: {storage.join(args.output, 'features')}  ({summary['rows']} rows)")
        else:
            print(
                f"features: none: no record of {args.data} carries an image "
                "(a text-only curation, with_images=false, has none)"
            )
        print_rejected(args.output, summary)

    return run_data_job("features", args, args.data, FeaturesConfig, run, show)


if __name__ == "__main__":
    sys.exit(main())
