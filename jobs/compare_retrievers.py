"""Train retriever variants on the same data, score them on the same held-out set, compare.

    python -m conceptual.jobs.compare_retrievers --features URI [--speech URI]
        [--teacher-speech URI ...] --eval-features URI [--eval-speech URI] [--split test]
        --variant "mms: loss=mms" --variant "triplet: loss=triplet" ...
        [--register none|best|all] [--config FILE] [key=value ...]

Every variant is `name: key=value ...` over the shared config (trailing key=value overrides,
as for train_retriever; experiment=NAME keeps the comparison in an experiment of its own).
Each trains on FEATURES (+ SPEECH, + TEACHER SPEECH with teacher=) as a child of one
comparison run and is scored on the --split of EVAL FEATURES (+ EVAL SPEECH) with R@1..100
both ways beside chance level; the comparison run holds comparison.json and comparison.md.
eval.seconds=8 lets speech models hear 8 s of each evaluation clip. Nothing is registered
unless --register says so. The table gives each variant's mean R@10 with its 95% bootstrap
interval over the images and its paired p-value against the best, `~` where the difference
is inside the noise; eval.bootstrap.samples=N and eval.bootstrap.seed=S set the resamples.
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_config, add_variants, location, prefixed
from conceptual.jobs.runner import family_job, job_run, report_run
from conceptual.jobs.train_retriever import add_data
from conceptual.pipelines.families import FAMILIES, Family


@family_job
def job(family: Family, name: str, argv: list[str] | None = None) -> int:
    """The job `name` of `family` (conceptual.pipelines.families)."""
    parser = JobParser(name, __doc__)
    add_data(parser, family)
    parser.add_argument("--eval-features", required=True, type=location, help="held-out features")
    parser.set_defaults(eval_speech=None)
    if family.hears_speech:
        parser.add_argument("--eval-speech", type=location, help="held-out clips (speech variants)")
    parser.add_argument("--split", default="test", help="the held-out split to score")
    add_variants(parser, "none")
    add_config(
        parser, "shared RetrieverTrainConfig", "loss=triplet; eval.KEY for RetrieverEvalConfig keys"
    )
    args = parser.parse_args(argv)
    from conceptual.config import load
    from conceptual.pipelines.families.retriever.compare_retrievers import compare, markdown_table
    from conceptual.pipelines.families.retriever.evaluate_retriever import RetrieverEvalConfig

    train_keys, eval_keys = prefixed(args.overrides, "eval.")
    with job_run(name, args.verbose) as log:
        config = load(family.recipe().config, args.config, train_keys)
        evaluation = load(RetrieverEvalConfig, None, [*eval_keys, f"split={args.split}"])
        result = compare(
            args.features,
            args.speech,
            args.eval_features,
            args.eval_speech,
            config,
            args.variant,
            evaluation,
            args.register,
            args.teacher_speech,
            family,
        )
    print(markdown_table(result["rows"]))
    report_run(result["run_id"], config.experiment, log, "comparison run")
    return 0


main = job(FAMILIES["retriever"], "compare_retrievers")


if __name__ == "__main__":
    sys.exit(main())
