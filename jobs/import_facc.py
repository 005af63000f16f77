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

from conceptual.importers import ImportConfig
from conceptual.jobs.arguments import JobParser, add_import_arguments, location
from conceptual.jobs.runner import job_main, run_import
from conceptual.speech.facc import describe, import_facc


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("import_facc", __doc__)
    parser.add_argument("--folder", required=True, type=location, help="the FACC folder")
    parser.add_argument("--flickr8k", required=True, type=location, help="the Flickr8k folder")
    add_import_arguments(parser, recordings=True)
    args = parser.parse_args(argv)

    def write(config: ImportConfig) -> dict:
        return import_facc(args.folder, args.flickr8k, args.output, config, args.speech_max_seconds)

    # Curated in the official splits: the paper's 1k validation and 1k test photos.
    flags = ["curated=true", "split_by=source"]
    return run_import("import_facc", args, write, ImportConfig, flags, describe)


if __name__ == "__main__":
    sys.exit(main())
