"""Extract CNN features of a curated dataset for the captioning and retrieval models.

    python -m conceptual.jobs.features --data URI --output URI [--config FILE] [key=value ...]

DATA is a curation output (or its curated/ folder). OUTPUT gets features/*.parquet (one row
per image and crop: id, split, caption, pooled, grid), features.json and _SUCCESS.
Overrides use the config's dotted keys, e.g. crops=4 image_size=256 cnn.precision=bf16.
"""

from __future__ import annotations

import argparse
import json
import sys

from conceptual.jobs.arguments import add_common, location, report_run
from conceptual.logs import job_output, stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.jobs.features", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--data", required=True, type=location, help="a curation output or its curated/ folder"
    )
    parser.add_argument(
        "--output", required=True, type=location, help="where features/ and features.json go"
    )
    parser.add_argument(
        "--config", type=location, help="YAML file (configs/features.yaml shows every key)"
    )
    add_common(parser)
    args = parser.parse_args(argv)
    from conceptual import storage
    from conceptual.config import ConfigError, load
    from conceptual.pipelines.features import FeaturesConfig, run
    from conceptual.runtime import init_ray
    from conceptual.storage import StorageError

    with job_output("features", args.verbose) as log:
        try:
            config = load(FeaturesConfig, args.config, args.overrides)
            if not storage.exists(args.data):
                raise StorageError(f"no curated data at {args.data}")
            print(f"features: {args.data} -> {args.output}", flush=True)
            init_ray()
            summary, run_id = run(args.data, args.output, config)
        except (ConfigError, StorageError) as exc:
            print(f"error: {exc}", file=stderr())
            return 2
    print(json.dumps(summary, indent=2))
    if summary["rows"]:
        print(f"features: {storage.join(args.output, 'features')}  ({summary['rows']} rows)")
    else:
        print(
            f"features: none: no record of {args.data} carries an image "
            "(a text-only curation, with_images=false, has none)"
        )
    report_run(run_id, config.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
