"""Score a retriever on a split: Recall@1/5/10/50/100 in both directions, beside chance level.

    python -m conceptual.jobs.evaluate_retriever --model MODEL_URI --features URI
        [--speech URI] [--split test] [--config FILE] [key=value ...]

MODEL_URI: models:/retriever-speech@champion, models:/retriever-text/3, runs:/<run id>/model
or a local model directory. FEATURES holds the split's images and captions; SPEECH (speech
models) the clips of those captions, synthesized or recorded (an import of a folder with
speech_gtts/). The table is printed and logged to MLflow as {query}_to_{target}.R@{k}
(speech_to_image.R@10, image_to_text.R@1, ...) with chance.* beside each, and the ranked
results of a few queries; a registered version is tagged with its mean R@10 on this set,
which the champion rule compares. seconds=8 lets a speech model hear 8 s of each clip.
asr=true scores a text model on the SPEECH clips as spoken queries, each transcribed by the
offline recognizer (speech_to_image.R@k, image_to_speech.R@k, and `wer`, its word error
rate against the clips' captions; no score tag).
Every R@k has its 95% bootstrap interval over the images beside it (NAME.ci95_low,
NAME.ci95_high); bootstrap.samples=N and bootstrap.seed=S set the resamples.
"""

from __future__ import annotations

import json
import sys

from conceptual.jobs.arguments import JobParser, add_evaluation_arguments, location
from conceptual.jobs.runner import family_job, run_evaluation
from conceptual.pipelines.families import FAMILIES, Family


@family_job
def job(family: Family, name: str, argv: list[str] | None = None) -> int:
    """The job `name` of `family` (conceptual.pipelines.families)."""
    parser = JobParser(name, __doc__)
    add_evaluation_arguments(parser, "max_images=500 seconds=8")
    parser.add_argument("--speech", type=location, help="clips of the split's captions")
    args = parser.parse_args(argv)
    from conceptual.pipelines.families.retriever.evaluate_retriever import RetrieverEvalConfig

    def show(result: dict) -> None:
        del result["resampled"]  # arrays for paired comparisons (compare_retrievers)
        print(result.pop("table"))
        print(json.dumps(result, indent=2))

    return run_evaluation(name, args, RetrieverEvalConfig, family.evaluate, args.speech, show=show)


main = job(FAMILIES["retriever"], "evaluate_retriever")


if __name__ == "__main__":
    sys.exit(main())
