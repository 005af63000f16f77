"""Print a caption for each image file (or each image file of a folder), from a saved
captioner; optionally write them as a COCO results JSON.

    python -m conceptual.jobs.caption --model MODEL_URI IMAGE_OR_FOLDER [...] [--beam N]
        [--batch 32] [--results-json PATH] [--compile]

MODEL_URI: models:/captioner@champion, models:/captioner/3, runs:/<run id>/model, or a
local directory holding a saved model (model.safetensors, config.json, vocab.json).
A folder stands for the image files directly inside it (.jpg, .jpeg, .png, .gif, .bmp,
.webp), in name order. Prints one line per image: the file name, a tab, the caption. A file
that cannot be read or decoded is skipped with a note on stderr; the job fails only when
no file could be captioned. --results-json writes `[{"image_id": ..., "caption": ...}]`,
what the COCO caption evaluation, the COCO server and the Conceptual Captions leaderboard
read: the id is the integer a COCO-style name ends with (COCO_val2014_000000123456.jpg and
000000123456.jpg are 123456), else the file's stem. --compile decodes a Transformer over a
static key/value cache with its step compiled (on GPUs a CUDA graph, replayed every step):
the same captions, worth it for many batches of one size (it compiles per batch size).
"""

from __future__ import annotations

import sys
from pathlib import Path

from conceptual.jobs.arguments import JobParser, add_model, add_verbose, file_output, location
from conceptual.jobs.rating_tasks import positive
from conceptual.jobs.runner import job_main, job_run


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("caption", __doc__)
    add_model(parser)
    parser.add_argument(
        "images", nargs="+", type=lambda p: Path(location(p)), metavar="IMAGE_OR_FOLDER"
    )
    parser.add_argument(
        "--beam", type=positive, help="beam width (default: the beam the model was evaluated at)"
    )
    parser.add_argument("--length-penalty", type=float, default=0.0)
    parser.add_argument(
        "--batch", type=positive, default=32, help="photos decoded and captioned at once"
    )
    parser.add_argument(
        "--results-json", type=file_output, help="also write the captions as a COCO results JSON"
    )
    parser.add_argument(
        "--compile", action="store_true", help="compile the decoding step (static cache)"
    )
    add_verbose(parser)
    args = parser.parse_args(argv)
    from conceptual import storage
    from conceptual.metrics import coco_results
    from conceptual.models.caption_files import by_image_id, caption_files, image_files
    from conceptual.models.inference import ImageCaptioner
    from conceptual.models.saving import SavedCaptioner
    from conceptual.pipelines.families import saved_form
    from conceptual.registry import resolve

    with job_run("caption", args.verbose, refused=(ValueError, storage.StorageError)):
        files = image_files(args.images)
        if not files:
            raise ValueError(f"no image files in {', '.join(map(str, args.images))}")
        model_dir = resolve(args.model)
        captioner = ImageCaptioner(
            model_dir,
            beam=args.beam,
            length_penalty=args.length_penalty,
            compiled=args.compile,
            kind=saved_form(model_dir, SavedCaptioner),  # any captioner family's
        )
        captioned, skipped = caption_files(captioner, files, args.batch)
        for bad in skipped:
            print(f"note: skipped {bad.path}: {bad.reason}", file=sys.stderr)
        if not captioned:
            raise ValueError(f"none of the {len(files)} image files could be captioned")
        by_id, repeated = by_image_id(captioned)
        for path in repeated:
            print(f"note: {path} has the image id of an earlier file: not in the results JSON",
                  file=sys.stderr)  # fmt: skip
        if args.results_json:
            storage.write_json(args.results_json, coco_results(by_id))
    for path, caption in captioned.items():
        print(f"{path}\t{caption}")
    if args.results_json:
        print(f"results: {args.results_json}  ({len(by_id)} captions, COCO results JSON)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
