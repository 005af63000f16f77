"""Train the four-view fluency classifier of Chinese translations, register it as `fluency-zh`,
and make it the champion if it beats the current one on the same dev labels.

    python -m conceptual.jobs.train_fluency --cn DIR [--config FILE] [--no-register]
        [key=value ...]

DIR is the Flickr8k-CN folder: the labels are Baidu's and Google's translations of the test
captions judged against the human translations (flickr8kzhmtest; chrF >= threshold, see
conceptual.fluency.labels), split by photo into train, dev and test. Overrides use the
config's keys (pipelines/families/fluency/train_fluency.py), e.g. epochs=4 threshold=0.45 model.hidden=256.
The run lands in MLflow (experiment `fluency`) with the held-out precision and recall of
the four-view score, of each view alone, of the paper's baselines (a coin; the English or
the Chinese sentence shorter than the mean fluent length) and of a tuned length rule; the best checkpoint by dev
AUC is logged under the run's model/ (runs:/<run id>/model) and becomes a version of
`fluency-zh`, and `champion` moves to it only when it beats the champion's dev AUC on the
same labels. --labels TASKS adds people's labels (a fluency_label task set two raters
answered; its answers from the rating page, or labels_ratings=FILE.csv): a sentence both
raters graded alike is labelled so, its derived label, if any, replaced
(conceptual.fluency.human_labels).
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, location, training_parser
from conceptual.jobs.runner import family_job, run_training_job
from conceptual.pipelines.families import FAMILIES, Family


def add_data(parser: JobParser) -> None:
    """What the fluency classifier trains on: Flickr8k-CN, and people's labels."""
    parser.add_argument("--cn", required=True, type=location, help="the Flickr8k-CN folder")
    parser.add_argument(
        "--labels",
        type=location,
        help="a fluency_label task set: people's labels beside the derived ones (key labels)",
    )


@family_job
def job(family: Family, name: str, argv: list[str] | None = None) -> int:
    """The job `name` of `family` (conceptual.pipelines.families)."""
    parser = training_parser(family, name, __doc__, add_data)
    args = parser.parse_args(argv)
    if args.labels:
        args.overrides = [*args.overrides, f"labels={args.labels}"]
    from conceptual.pipelines.families.fluency.evaluate_fluency import held_out_markdown

    def show(result: dict) -> None:
        print(held_out_markdown(result["held_out"]))

    return run_training_job(args, family, args.cn, show=show)


main = job(FAMILIES["fluency"], "train_fluency")


if __name__ == "__main__":
    sys.exit(main())
