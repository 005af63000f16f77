"""Train a dual encoder for image<->speech or image<->text retrieval, register it, and make it
the champion if it beats the current one on the same dev set.

    python -m conceptual.jobs.train_retriever --features URI [--speech URI] [--config FILE]
        modality=speech|text loss=mms|triplet [key=value ...]
    python -m conceptual.jobs.train_retriever --features URI --speech URI modality=speech
        teacher=TEXT_MODEL_URI [--teacher-speech URI ...]

FEATURES is a features job's output (the images and their captions); SPEECH, for
modality=speech, any output holding clips of those captions (a synthesize_speech output, or
an import that carried recorded speech). Overrides use the config's keys
(configs/train_retriever.yaml lists them all), e.g. batch_size=24 epochs=4 workers=2
model.embed_dim=1536. The run lands in MLflow (experiment `retrieval`); the best checkpoint
by dev mean R@10 (both directions) becomes a version of `retriever-speech` or
`retriever-text`, and `champion` moves to it only when it beats the champion's on the same
dev set. With teacher=TEXT_MODEL_URI the speech tower also learns the text retriever's
embedding of each clip's caption (distillation); --teacher-speech adds clips whose captions
teach it without a photo (synthesize_speech outputs of any captions). Warm starts:
init=URI (the whole model), init.image=URI, init.speech=URI, init.text=URI (one tower).
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, location, training_parser
from conceptual.jobs.runner import family_job, run_training_job
from conceptual.pipelines.families import FAMILIES, Family


def add_data(parser: JobParser, family: Family) -> None:
    """What a retriever trains on (compare_retrievers' variants too): the photos and their
    captions, and for a family with a speech tower their clips for modality=speech and more
    clips that teach the speech tower (a text-image family offers no option it refuses)."""
    parser.add_argument("--features", required=True, type=location, help="a features job's output")
    parser.set_defaults(speech=None, teacher_speech=[])
    if not family.hears_speech:
        return
    parser.add_argument("--speech", type=location, help="clips of the captions (modality=speech)")
    parser.add_argument(
        "--teacher-speech",
        action="append",
        default=[],
        type=location,
        help="more clips that teach the speech tower through teacher= (repeatable)",
    )


@family_job
def job(family: Family, name: str, argv: list[str] | None = None) -> int:
    """The job `name` of `family` (conceptual.pipelines.families)."""
    parser = training_parser(family, name, __doc__, lambda parser: add_data(parser, family))
    args = parser.parse_args(argv)
    return run_training_job(args, family, args.features, args.speech, args.teacher_speech)


main = job(FAMILIES["retriever"], "train_retriever")


if __name__ == "__main__":
    sys.exit(main())
