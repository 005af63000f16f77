"""Print a caption for each image file, from a saved captioner.

    python -m conceptual.jobs.caption --model MODEL_URI IMAGE [IMAGE ...] [--beam 4]

MODEL_URI: models:/captioner@champion, models:/captioner/3, runs:/<run id>/model, or a
local directory holding a saved model (model.safetensors, config.json, vocab.json).
Prints one line per image: the file name, a tab, the caption.
"""

from __future__ import annotations

import sys
from pathlib import Path

from conceptual.jobs.arguments import JobParser, job_main, job_run, location


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser(
        prog="python -m conceptual.jobs.caption", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", required=True, type=location, help="a model URI or directory")
    parser.add_argument("images", nargs="+", type=lambda p: Path(location(p)), metavar="IMAGE")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--length-penalty", type=float, default=0.0)
    parser.add_argument("--verbose", action="store_true", help="show MLflow's and torch's own logs")
    args = parser.parse_args(argv)
    from conceptual.models.inference import ImageCaptioner
    from conceptual.registry import resolve

    missing = [str(p) for p in args.images if not p.is_file()]
    with job_run("caption", args.verbose, refused=(ValueError,)):
        if missing:
            raise ValueError(f"no such image file: {', '.join(missing)}")
        captioner = ImageCaptioner(
            resolve(args.model), beam=args.beam, length_penalty=args.length_penalty
        )
        captions = captioner.caption_bytes([p.read_bytes() for p in args.images])
    for path, caption in zip(args.images, captions):
        print(f"{path}\t{caption}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
