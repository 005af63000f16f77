"""Import a folder of images and a captions CSV (Flickr8k's layout) as platform records.

    python -m conceptual.jobs.import_captions --folder DIR --output URI [--curated]
        [--speech-max-seconds 30] [key=value ...]

The folder holds captions.csv (header `image,caption`, one row per caption) and the images
it names under images/. URIs are paths, file:// or s3://. Curated records are split by a
stable hash of each image, so all captions of an image share its split; the fractions are
ImportConfig keys, e.g. splits.train=0.8 splits.val=0.1 splits.test=0.1. Recorded speech
beside them (speech_gtts/IMAGE_STEM.mp3, the image's first caption spoken) goes to
OUTPUT/clips/ as 16 kHz FLAC clip records (conceptual.speech.human); each recording's
header is checked before it is decoded, and one over --speech-max-seconds is not imported.
"""

from __future__ import annotations

import sys

from conceptual.importers import csv_pairs
from conceptual.jobs.arguments import JobParser, add_import_arguments, location
from conceptual.jobs.runner import job_main, run_pairs_import
from conceptual.speech.human import speech_step


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("import_captions", __doc__)
    parser.add_argument("--folder", required=True, type=location, help="the dataset's folder")
    parser.add_argument(
        "--curated", action="store_true", help="write curated records, not candidates"
    )
    parser.add_argument("--images-subdir", default="images", help="image folder inside --folder")
    parser.add_argument("--captions-file", default="captions.csv", help="CSV inside --folder")
    add_import_arguments(parser, recordings=True)
    args = parser.parse_args(argv)

    def pairs():
        return csv_pairs(args.folder, args.images_subdir, args.captions_file)

    # Recorded speech in the folder (speech_gtts/IMAGE_STEM.mp3) becomes clips of its images.
    then = speech_step(args.folder, args.speech_max_seconds)
    return run_pairs_import("import_captions", args, pairs, [f"curated={args.curated}"], then)


if __name__ == "__main__":
    sys.exit(main())
