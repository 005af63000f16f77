"""Import COCO captions (images and their human captions) as candidates or curated records.

    python -m conceptual.jobs.import_coco --root DIR --output URI [--curated] [--split-by hash]
    python -m conceptual.jobs.import_coco --annotations FILE --images DIR [...] --output URI

--root finds every captions_<split>.json, in COCO's layout (annotations/captions_train2017.json
beside train2017/) or next to the image folders; --annotations and --images pair up in order.
URIs are paths, file:// or s3://. Curated records keep COCO's split (train2017 -> train)
unless --split-by hash, whose fractions are ImportConfig keys (splits.train=0.8 ...).
"""

from __future__ import annotations

import argparse
import sys
from itertools import chain

from conceptual.importers import ImportSourceError, coco_pairs, coco_sources
from conceptual.jobs.arguments import JobParser, add_import_arguments, location
from conceptual.jobs.runner import job_main, run_pairs_import


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("import_coco", __doc__)
    parser.add_argument(
        "--root", type=location, help="a COCO folder: captions_*.json and their image folders"
    )
    parser.add_argument(
        "--annotations",
        action="append",
        default=[],
        type=location,
        help="a captions_*.json (repeatable)",
    )
    parser.add_argument(
        "--images",
        action="append",
        default=[],
        type=location,
        help="its image folder (repeatable, in order)",
    )
    parser.add_argument(
        "--curated", action="store_true", help="write curated records, not candidates"
    )
    parser.add_argument(
        "--split-by",
        choices=("source", "hash"),
        default="source",
        help="curated splits: COCO's own (default) or a stable hash of each image",
    )
    add_import_arguments(parser)
    args = parser.parse_args(argv)

    def pairs():
        return chain(*(coco_pairs(annotations, images) for annotations, images in _sources(args)))

    flags = [f"curated={args.curated}", f"split_by={args.split_by}"]
    return run_pairs_import("import_coco", args, pairs, flags)


def _sources(args: argparse.Namespace) -> list[tuple[str, str]]:
    if args.root and (args.annotations or args.images):
        raise ImportSourceError("give --root or --annotations/--images, not both")
    if args.root:
        return coco_sources(args.root)
    if not args.annotations or len(args.annotations) != len(args.images):
        raise ImportSourceError("give --root, or as many --annotations as --images (at least one)")
    return list(zip(args.annotations, args.images))


if __name__ == "__main__":
    sys.exit(main())
