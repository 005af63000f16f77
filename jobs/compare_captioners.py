"""Train captioner variants on one features dataset and compare them.

    python -m conceptual.jobs.compare_captioners --features URI
        [--variants rnn-1x1,rnn-8x8,transformer-1x1,transformer-8x8]
        [--variant "name: key=value ..." ...]
        [--register best|all|none] [--config FILE] [key=value ...]

Every variant trains with the same CaptionerTrainConfig (overrides as for train_captioner, e.g.
epochs=20 workers=2; experiment=NAME keeps the comparison in an experiment of its own) as a
child of one comparison run, whose artifacts are the comparison table (comparison.json,
comparison.md) and plot (comparison.png). `--variant "name: key=value ..."` adds a variant
of its own overrides, as compare_retrievers' are (e.g. "wide: model.d_model=1024"); with
--variant and no --variants, only those train. The best variant by dev CIDEr is registered and
the champion rule applied (`--register all`: every variant; `--register none` or
`--no-register`: none). The table gives each variant's dev CIDEr with its 95% bootstrap
interval over the dev images and its paired p-value against the best, `~` where the
difference is inside the noise; bootstrap.samples=N and bootstrap.seed=S set the resamples.
"""

from __future__ import annotations

import argparse
import sys

from conceptual.jobs.arguments import JobParser, add_config, add_variants, prefixed
from conceptual.jobs.runner import family_job, job_run, report_run
from conceptual.jobs.train_captioner import add_data
from conceptual.models.variants import MODEL_NAME, VARIANTS
from conceptual.pipelines.families import FAMILIES, Family


@family_job
def job(family: Family, name: str, argv: list[str] | None = None) -> int:
    """The job `name` of `family` (conceptual.pipelines.families)."""
    formatter = argparse.ArgumentDefaultsHelpFormatter
    parser = JobParser(name, __doc__, keys=family.config_file, formatter_class=formatter)
    add_data(parser)
    add_variants(parser, "best", VARIANTS)
    parser.add_argument("--model-name", default=MODEL_NAME, help="registered model")
    add_config(parser, "CaptionerTrainConfig", "epochs=20 workers=2; bootstrap.samples=N")
    args = parser.parse_args(argv)
    named = args.variants or ("" if args.variant else ",".join(VARIANTS))
    variants = [v.strip() for v in named.split(",") if v.strip()] + args.variant
    from conceptual.config import load
    from conceptual.intervals import BootstrapConfig
    from conceptual.pipelines.families.captioner.compare_captioners import compare, markdown_table

    train_keys, bootstrap_keys = prefixed(args.overrides, "bootstrap.")
    with job_run(name, args.verbose) as log:  # ValueError: e.g. no dev split
        config = load(family.recipe().config, args.config, train_keys)
        bootstrap = load(BootstrapConfig, None, bootstrap_keys)
        result = compare(
            args.features, config, variants, args.register, args.model_name, bootstrap, family
        )
    print(markdown_table(result["rows"]))
    for row in result["rows"]:
        if row["version"] is not None:
            print(
                f"{row['variant']}: models:/{args.model_name}/{row['version']} ({row['champion']})"
            )
    report_run(result["run_id"], config.experiment, log, "comparison run")
    return 0


main = job(FAMILIES["captioner"], "compare_captioners")


if __name__ == "__main__":
    sys.exit(main())
