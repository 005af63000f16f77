"""Score the fluency of every translated caption of a Chinese import with a fluency classifier.

    python -m conceptual.jobs.score_fluency --model MODEL_URI --data URI --output URI
        [--config FILE] [key=value ...]

MODEL_URI: models:/fluency-zh@champion, models:/fluency-zh/2, runs:/<run id>/model or a
local model directory (conceptual.jobs.train_fluency makes them). DATA is an
import_flickr8k_cn output (or its curated/ folder). OUTPUT gets the same records with
`fluency` set (curated/*.parquet, which the features job reads like any curated data),
fluency.json (records scored, the share fluent by source, the rate in sentences per
second) and _SUCCESS, and rejected/*.parquet with the records whose scoring raised (reason
internal_error; more than errors.max_rate of them, or errors.max_count, fails the job).
Overrides: actors=2 cpus_per_actor=1 batch_size=256 errors.max_rate=0.01.
"""

from __future__ import annotations

import json
import sys
from functools import partial

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments, add_model
from conceptual.jobs.runner import job_main, print_rejected, run_data_job


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("score_fluency", __doc__)
    add_model(parser)
    add_data_arguments(parser, "where curated/ goes", reads="a Chinese import's output")
    add_config(parser, "ScoreConfig", "actors=2 batch_size=256")
    args = parser.parse_args(argv)
    from conceptual import storage
    from conceptual.pipelines.features.score_fluency import ScoreConfig, run

    def show(summary: dict, config: ScoreConfig) -> None:
        print(json.dumps(summary, indent=2))
        print(f"curated:  {storage.join(args.output, 'curated')}  ({summary['scored']} scored)")
        print_rejected(args.output, summary)

    score = partial(run, args.model)
    # refused besides: not a fluency model, not Chinese records
    return run_data_job("score_fluency", args, args.data, ScoreConfig, score, show, (ValueError,))


if __name__ == "__main__":
    sys.exit(main())
