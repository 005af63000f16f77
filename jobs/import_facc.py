"""Import the Flickr Audio Caption Corpus with its Flickr8k photos as curated records and clips.

    python -m conceptual.jobs.import_facc --folder FACC_DIR --flickr8k FLICKR8K_DIR
        --output URI [--speech-max-seconds 30] [key=value ...]

FACC_DIR is the corpus as released (wavs/*.wav, wav2capt.txt, optional wav2spk.txt);
FLICKR8K_DIR the Flickr8k release (Flicker8k_Dataset/ or images/, Flickr8k.token.txt and the
Flickr_8k.{train,dev,test}Images.txt splits, dev becoming val). Writes OUTPUT/curated/ (five
captions of each photo, in its official split), OUTPUT/clips/ (each recording a 16 kHz FLAC
clip record of its caption, with its caption index and speaker) and OUTPUT/import.json with
every skipped caption and recording counted by reason (conceptual.speech.facc). Overrides
are ImportConfig keys (rows_per_part=...).
"""

from __future__ import annotations

import sys

from conceptual.config import load
from conceptual.importers import ImportConfig, run_import
from conceptual.jobs.arguments import JobParser, job_main, location, output
from conceptual.speech.facc import describe, import_facc
from conceptual.speech.human import MAX_SECONDS


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser(
        prog="python -m conceptual.jobs.import_facc", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--folder", required=True, type=location, help="the FACC folder")
    parser.add_argument("--flickr8k", required=True, type=location, help="the Flickr8k folder")
    parser.add_argument(
        "--output", required=True, type=output, help="where the Parquet and import.json go"
    )
    parser.add_argument(
        "--speech-max-seconds",
        type=float,
        default=MAX_SECONDS,
        help="longer recordings are not imported (counted as too_long_clip)",
    )
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="ImportConfig keys")
    args = parser.parse_args(argv)

    def write():
        # Curated in the official splits: the paper's 1k validation and 1k test photos.
        config = load(ImportConfig, None, ["curated=true", "split_by=source", *args.overrides])
        return import_facc(args.folder, args.flickr8k, args.output, config, args.speech_max_seconds)

    return run_import(args.output, write, describe)


if __name__ == "__main__":
    sys.exit(main())
