"""Compare the six ways to caption in Chinese from translated captions (docs/spec/fluency.md).

    python -m conceptual.jobs.compare_fluency --features ZH --english-features EN
        --reference NAME=URI [--reference NAME=URI ...] --cn DIR [--config FILE]
        [--train-config FILE] [key=value ...]

ZH: features of the translated captions with their fluency scores (import_flickr8k_cn,
score_fluency, features); EN: features of the same photos' English captions (for the late
translation baselines); each reference set: features whose test split holds the test photos
with Chinese references (human translations, native captions); DIR: the Flickr8k-CN folder,
whose provided translations are the offline translator. Keys of FluencyComparisonConfig
(pipelines/families/fluency/compare_fluency.py): train.* (the captioners' CaptionerTrainConfig, e.g. train.epochs=10),
strategies, late_translation, rerank, translator, fluency_model, split, beam, registered,
bootstrap.samples and bootstrap.seed (the resamples of the 95% intervals and of the paired
p-values against each column's best; the table marks differences inside the noise `~`).
--manual-features: features of native-written Chinese captions (import_flickr8k_cn
source=native), a captioner trained on them as the paper's "Manual Flickr8k-cn" row.
--train-config: a train_captioner config for every captioner of the comparison, such as the
paper's recipe, configs/recipes/fluency_captioner.yaml (train.* overrides still apply).
Every run lands in one experiment (`fluency`); the comparison run holds the table and plot.
"""

from __future__ import annotations

import argparse
import sys

from conceptual.jobs.arguments import JobParser, add_config, location
from conceptual.jobs.runner import family_job, job_run, report_run
from conceptual.pipelines.families import FAMILIES, Family


def reference(value: str) -> tuple[str, str]:
    """argparse type of NAME=URI."""
    name, sep, uri = value.partition("=")
    if not sep or not name or not uri:
        raise argparse.ArgumentTypeError(f"expected NAME=URI, not {value!r}")
    return name, location(uri)


@family_job
def job(family: Family, name: str, argv: list[str] | None = None) -> int:
    """The job `name` of `family` (conceptual.pipelines.families)."""
    parser = JobParser(name, __doc__)
    parser.add_argument(
        "--features", required=True, type=location, help="features of the scored translations"
    )
    parser.add_argument(
        "--english-features", type=location, help="features of the photos' English captions"
    )
    parser.add_argument(
        "--reference",
        required=True,
        action="append",
        type=reference,
        metavar="NAME=URI",
        help="features of the test photos with Chinese references (once per reference set)",
    )
    parser.add_argument("--cn", type=location, help="the Flickr8k-CN folder (the translator)")
    parser.add_argument(
        "--manual-features",
        type=location,
        help="features of human-written Chinese captions: the 'Manual Flickr8k-cn' row",
    )
    parser.add_argument(
        "--train-config",
        type=location,
        help="YAML file of train_captioner keys for every captioner "
        "(configs/recipes/fluency_captioner.yaml: the paper's)",
    )
    add_config(parser, "FluencyComparisonConfig", "train.epochs=10 registered=none")
    args = parser.parse_args(argv)
    from conceptual.config import ConfigError, load
    from conceptual.fluency.translation import ProvidedTranslations
    from conceptual.importers import ImportSourceError
    from conceptual.pipelines.families.fluency.compare_fluency import (
        FluencyComparisonConfig,
        compare,
        markdown_table,
    )
    from conceptual.storage import StorageError

    references = dict(args.reference)
    with job_run(
        name,
        args.verbose,
        refused=(ConfigError, StorageError, ImportSourceError, ValueError, OSError),
    ) as log:
        config = with_train_config(
            load(FluencyComparisonConfig, args.config, args.overrides),
            args.train_config,
            args.overrides,
        )
        translator = None
        if config.late_translation and args.cn:
            translator = ProvidedTranslations(args.cn, config.translator, nearest=True)
        result = compare(
            args.features,
            references,
            config,
            args.english_features,
            translator,
            args.manual_features,
        )
    print(markdown_table(result["rows"], list(references)))
    report_run(result["run_id"], config.experiment, log, "comparison run")
    return 0


main = job(FAMILIES["fluency"], "compare_fluency")


def with_train_config(config, path: str | None, overrides: list[str]):
    """`config` whose captioners train with the keys of the train_captioner config at
    `path`, the `train.*` overrides on top (None: `config` as it is)."""
    if path is None:
        return config
    from conceptual.config import load
    from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig

    own = [o.removeprefix("train.") for o in overrides if o.startswith("train.")]
    return config.model_copy(update={"train": load(CaptionerTrainConfig, path, own)})


if __name__ == "__main__":
    sys.exit(main())
