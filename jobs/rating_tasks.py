"""Make a rating task set for human evaluation from a run or a curated dataset.

    python -m conceptual.jobs.rating_tasks --kind KIND (--run RUN_ID | --data URI)
        --output URI [--items N] [--raters 3] [--seed S]
        [--direction query_to_image|image_to_query] [--photo whole|crop]

KIND: caption_quality (GOOD/BAD; from a curated dataset or an evaluate_captioner run),
retrieval (which of the top 5 images match the query; from an evaluate_retriever run),
zh_caption (relevance and fluency 1-5 of every approach's caption of a photo, side by side
in a shuffled order; from a compare_fluency run, an evaluate_captioner run of a Chinese
captioner, or a dataset with Chinese captions) or fluency_label (fluent or not; from a
dataset's machine translations). OUTPUT gets tasks.parquet (one row per item: item_id, the
photo or the ranked images, the text or the captions, the hidden approaches) and
tasks.json. Retrieval items show a query and the images found for it, or with
`--direction image_to_query` a photo and the captions found for it (Table 4 both ways).
`--photo crop` shows every photo as the centre square the model saw instead of whole
(Table 3's crop condition). The same inputs and seed give the same items. Serve them with
`python -m conceptual.jobs.rating_page --tasks OUTPUT`.
"""

from __future__ import annotations

import argparse
import sys

from conceptual.jobs.arguments import JobParser, add_verbose, location, output
from conceptual.jobs.runner import job_main, job_run
from conceptual.rating.tasks import DIRECTIONS, KINDS, PHOTOS, sentences


def positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return int(value)


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("rating_tasks", __doc__)
    parser.add_argument("--kind", required=True, choices=sorted(KINDS), help="what raters judge")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="an MLflow run id (evaluate_* or compare_fluency)")
    source.add_argument("--data", type=location, help="a curated dataset (an import's output)")
    parser.add_argument("--output", required=True, type=output, help="where the task set goes")
    parser.add_argument(
        "--items", type=positive, help="items to sample (zh_caption and runs with a baseline: "
        "images, each with every approach's caption); default: all"
    )  # fmt: skip
    parser.add_argument("--raters", type=positive, default=3, help="distinct raters per item")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    parser.add_argument(
        "--direction", choices=DIRECTIONS, default=DIRECTIONS[0],
        help="retrieval: a query and its images, or a photo and its captions",
    )  # fmt: skip
    parser.add_argument(
        "--photo", choices=PHOTOS, default=PHOTOS[0],
        help="photos whole, or cut to the centre square the model saw",
    )  # fmt: skip
    add_verbose(parser)
    args = parser.parse_args(argv)
    from conceptual.pipelines.rating.rating_tasks import build, sampled
    from conceptual.storage import StorageError

    # no such run, data or photos
    refused = (StorageError, ValueError)
    with job_run("rating_tasks", args.verbose, refused, output=args.output):
        tasks = build(
            args.kind, args.output, args.run, args.data, args.items, args.raters, args.seed,
            direction=args.direction, photo=args.photo,
        )  # fmt: skip
    shown = [s["approach"] for item in tasks.items for s in sentences(item)]
    counts = ", ".join(f"{a} {shown.count(a)}" for a in tasks.manifest["approaches"])
    print(
        f"tasks:    {args.output}  ({len(tasks.items)} items: {counts}; {args.raters} raters each)"
    )
    if args.items and (found := sampled(tasks)) < args.items:
        print(f"note:     --items {args.items}, and the source holds {found}: all of them are in")
    if undecodable := tasks.manifest["source"].get("undecodable"):
        print(f"note:     {undecodable} items left out: a photo of theirs did not decode to crop")
    print(f"task set: {tasks.name}")
    print(f"serve:    python -m conceptual.jobs.rating_page --tasks {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
