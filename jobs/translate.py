"""Machine-translate the English captions of a curated dataset into Chinese records the fluency
pipeline reads (score_fluency, features, train_captioner language=zh).

    python -m conceptual.jobs.translate --data CURATED --output URI --to zh [--cn DIR]
        [--config FILE] [key=value ...]

CURATED: a curation (curate, import_conceptual, import_captions, import_flickr8k_cn
source=english) or its curated/ folder. OUTPUT gets curated/*.parquet as import_flickr8k_cn
writes Chinese captions (caption segmented, text, original = the English caption, language,
source), rejected/*.parquet (no translation, or its translation raised), translate.json and
_SUCCESS. The translator: translator=baidu (default) or google, Flickr8k-CN's provided
translations, nearest English sentence for one they lack (offline; --cn DIR), or
translator=service service.url=URL, a LibreTranslate-compatible service whose key is in
$CONCEPTUAL_TRANSLATE_KEY (service.key_env). Keys: pipelines/features/translate.py TranslateConfig.
"""

from __future__ import annotations

import json
import sys

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments, location
from conceptual.jobs.runner import job_main, print_rejected, run_data_job


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("translate", __doc__, keys="translate.yaml")
    add_data_arguments(parser, "where curated/ goes", reads="a curated dataset")
    parser.add_argument("--to", required=True, choices=["zh"], help="the target language")
    parser.add_argument(
        "--cn", type=location, help="the Flickr8k-CN folder (the offline translator)"
    )
    add_config(parser, "TranslateConfig", "translator=google batch_size=256")
    args = parser.parse_args(argv)
    from conceptual import storage
    from conceptual.pipelines.features.translate import TranslateConfig, run
    from conceptual.services import ServiceDown

    def translate(data: str, out: str, config: TranslateConfig):
        return run(data, out, config, args.cn, args.to)

    def check(data: str, config: TranslateConfig) -> TranslateConfig:
        from conceptual.pipelines.features.translate import make_translator

        if config.translator == "service":  # a provided one loads its files on the actors
            make_translator(config, args.cn, args.to)
        elif args.cn is None:
            make_translator(config, None, args.to)  # its error: give --cn
        return config

    def show(summary: dict, config: TranslateConfig) -> None:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        translated = summary["translated"]
        print(f"curated:  {storage.join(args.output, 'curated')}  ({translated} translated)")
        print_rejected(args.output, summary, "records")

    return run_data_job(
        "translate",
        args,
        args.data,
        TranslateConfig,
        translate,
        show,
        (ValueError, ServiceDown),
        check,
    )


if __name__ == "__main__":
    sys.exit(main())
