"""Recaption a curated dataset (BLIP's CapFilt): a captioner writes a caption for each image,
and the alignment scorer keeps, per image, its web captions, the synthetic one, or both.

    python -m conceptual.jobs.recaption --data CURATED --output URI [--model MODEL_URI]
        [--config FILE] [key=value ...]

CURATED: a curation with images (curate, import_captions, import_coco, import_conceptual) or
its curated/ folder. MODEL_URI: the captioner (default models:/captioner@champion;
models:/captioner/3, runs:/<run id>/model or a saved model's folder). The scorer:
scorer=URI (default models:/contrastive@champion; curation's alignment.scorer forms), and
min_score=X. OUTPUT gets curated/*.parquet (the records, each with `caption_source`, web or
synthetic, and `alignment_score`), rejected/*.parquet (web captions dropped as
low_alignment, records that raised), choices/*.parquet (per image: the synthetic caption,
its score, the best web caption's, what was kept), recaption.json and _SUCCESS.
Keys: pipelines/curation/recaption.py RecaptionConfig (configs/recaption.yaml).
"""

from __future__ import annotations

import json

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments
from conceptual.jobs.runner import job_main, print_rejected, run_data_job

CAPTIONER = "models:/captioner@champion"


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("recaption", __doc__, keys="recaption.yaml")
    add_data_arguments(parser, "where curated/ goes", reads="a curated dataset with images")
    parser.add_argument(
        "--model", default=CAPTIONER, help=f"the captioner's URI (default {CAPTIONER})"
    )
    add_config(parser, "RecaptionConfig", "scorer=models:/contrastive/2 min_score=0.25")
    args = parser.parse_args(argv)
    from conceptual import storage
    from conceptual.pipelines.curation.recaption import RecaptionConfig, run

    def recaption(data: str, out: str, config: RecaptionConfig):
        return run(data, out, config, args.model)

    def show(summary: dict, config: RecaptionConfig) -> None:
        print(json.dumps(summary, indent=2))
        kept, rate = summary["kept"], summary["synthetic_chosen_rate"]
        print(
            f"curated:  {storage.join(args.output, 'curated')}  ({summary['written']} records; "
            f"images keeping web {kept['web']}, synthetic {kept['synthetic']}, both "
            f"{kept['both']}: the synthetic caption kept for {rate:.1%})"
        )
        print_rejected(args.output, summary, "records")

    return run_data_job(
        "recaption", args, args.data, RecaptionConfig, recaption, show, (ValueError,)
    )


if __name__ == "__main__":
    raise SystemExit(main())
