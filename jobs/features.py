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

from conceptual import storage
from conceptual.config import ConfigError, load
from conceptual.pipelines.features import FeaturesConfig, run
from conceptual.runtime import init_ray
from conceptual.storage import StorageError
from conceptual.tracking import tracking_uri


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.jobs.features", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", required=True, help="a curation output or its curated/ folder")
    parser.add_argument("--output", required=True, help="where features/ and features.json go")
    parser.add_argument("--config", help="YAML file (configs/features.yaml shows every key)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args(argv)
    try:
        config = load(FeaturesConfig, args.config, args.overrides)
        if not storage.exists(args.data):
            raise StorageError(f"no curated data at {args.data}")
        init_ray()
        summary, run_id = run(args.data, args.output, config)
    except (ConfigError, StorageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    print(f"features: {storage.join(args.output, 'features')}  ({summary['rows']} rows)")
    print(f"mlflow:   run {run_id} in experiment {config.experiment!r} at {tracking_uri()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
