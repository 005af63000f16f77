"""Score a captioner on a split of a features dataset, beside the nearest-neighbour baseline.

    python -m conceptual.jobs.evaluate_captioner --model MODEL_URI --features URI
        [--split test] [--baseline-features URI] [--results-json PATH] [--json]
        [--config FILE] [key=value ...]

MODEL_URI: models:/captioner@champion, models:/captioner/3, runs:/<run id>/model or a local
model directory. The split's images are captioned with beam search and scored against all
their references (CIDEr, BLEU-1..4, ROUGE-L, METEOR with Java; SPICE is reported as
unavailable without its CoreNLP jars). The baseline captions each image with the caption of
the most similar training image of --baseline-features (default: the same features). The
run lands in MLflow with a samples table and grid; a registered version is tagged with its
CIDEr on this evaluation set, which the champion rule compares. A Chinese captioner
(captioner-zh) is scored on words and on characters (char.*) against the features' Chinese
captions, and with fluency_model=MODEL_URI (models:/fluency-zh@champion) by the mean
fluency of its captions too. --results-json writes the model's captions as the COCO
results JSON (`[{"image_id": ..., "caption": ...}]`, the images' image_id) that the COCO
caption evaluation and the leaderboards read; the run keeps the same file as results.json.
It prints the scores as the pipeline job does, a table beside the baseline's (with a note
when the baseline wins); --json prints the whole result as JSON instead.
"""

from __future__ import annotations

import json
import sys

from conceptual.jobs.arguments import JobParser, add_evaluation_arguments, file_output, location
from conceptual.jobs.runner import family_job, run_evaluation
from conceptual.pipelines.families import FAMILIES, Family


@family_job
def job(family: Family, name: str, argv: list[str] | None = None) -> int:
    """The job `name` of `family` (conceptual.pipelines.families)."""
    parser = JobParser(name, __doc__)
    add_evaluation_arguments(parser)
    parser.add_argument(
        "--baseline-features",
        type=location,
        help="the features whose train split the baseline searches",
    )
    parser.add_argument(
        "--results-json",
        type=file_output,
        help="also write the captions as a COCO results JSON file here",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    from conceptual.pipelines.families.captioner.evaluate_captioner import (
        CaptionerEvalConfig,
        held_out_table,
    )

    def show(result: dict) -> None:
        print(json.dumps(result, indent=2) if args.json else held_out_table(result))
        if args.results_json:
            images = result["images"]
            print(f"results:  {args.results_json}  ({images} captions, COCO results JSON)")

    more = (args.baseline_features, args.results_json)
    return run_evaluation(name, args, CaptionerEvalConfig, family.evaluate, *more, show=show)


main = job(FAMILIES["captioner"], "evaluate_captioner")


if __name__ == "__main__":
    sys.exit(main())
