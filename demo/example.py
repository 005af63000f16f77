"""A small input that runs every step of the pipeline job (the README's "From data to an endpoint"):
the demo's photos (5 scenes, each in 3 views: 15 JPEGs of 400 to 600 pixels a side, all
above the image filters' 400-pixel `image.min_side`) with captions that fit them, in the
layout import_captions reads (captions.csv, images/).

    python -m conceptual_demo.example out/example [--captions-per-photo 8]
    python -m conceptual.jobs.import_captions --folder out/example --output out/example-import
    python -m conceptual.jobs.pipeline --config examples/pipeline_small.yaml \\
        input=out/example-import/candidates output=out/pipeline-all
"""

from __future__ import annotations

import argparse
import sys

from conceptual_demo.images import write_captioned_folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conceptual_demo.example", description=__doc__)
    parser.add_argument("folder", help="where captions.csv and images/ go (created)")
    parser.add_argument("--captions-per-photo", type=int, default=8)
    args = parser.parse_args(argv)
    catalogue = write_captioned_folder(args.folder, args.captions_per_photo)
    photos = len(catalogue.views())
    print(f"example: {photos} photos, {photos * args.captions_per_photo} captions in {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
