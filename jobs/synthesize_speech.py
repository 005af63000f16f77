"""Read every caption of a dataset aloud: Conceptual Spoken Captions (espeak-ng, Flite, Festival).

    python -m conceptual.jobs.synthesize_speech --input URI --output URI [--config FILE] [key=value ...]

INPUT is a curation, import (--curated or not) or features output. OUTPUT gets clips/*.parquet
(16 kHz FLAC clips with their caption, image id, split and drawn engine/voice/rate/pitch/gain),
shards/*.tar (WebDataset), rejected/*.parquet, stats.json and _SUCCESS. A rerun into the same
OUTPUT resumes: finished shards are kept. Overrides use configs/speech.yaml's dotted keys,
e.g. synthesis.seed=1 synthesis.voices.pool=all max_seconds=20 clips_per_shard=256.
"""

from __future__ import annotations

import json
import sys

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments
from conceptual.jobs.runner import job_main, run_data_job


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("synthesize_speech", __doc__, keys="speech.yaml")
    add_data_arguments(parser, "where clips/ and stats go", "--input", "a dataset of captions")
    add_config(parser, "SpeechConfig", "synthesis.seed=1 max_seconds=20")
    args = parser.parse_args(argv)
    # Imported here, so that --help and argument errors answer at once.
    from conceptual import funnel, storage
    from conceptual.candidates import CandidateFormatError
    from conceptual.pipelines.features.speech import SpeechConfig, example_clips, run

    def show(stats: dict, config: SpeechConfig) -> None:
        print(funnel.render(stats))
        print(f"audio:    {json.dumps(stats['audio'])}")
        for clip in example_clips(args.output, 1):
            parameters = {
                k: round(v, 3) if isinstance(v, float) else v
                for k, v in clip.items()
                if k in ("source", "voice", "rate", "pitch", "gain", "seed", "engine_wpm")
            }
            print(f"example:  {clip['caption']!r} {json.dumps(parameters)}")
        print(f"clips:    {storage.join(args.output, 'clips')}  ({stats['kept']} clips)")
        if (rejected := stats["input"] - stats["kept"]) > 0:
            print(f"rejected: {storage.join(args.output, 'rejected')}  ({rejected})")
        if config.webdataset:
            print(f"shards:   {storage.join(args.output, 'shards')}  (WebDataset)")
        print(f"stats:    {storage.join(args.output, 'stats.json')}")

    return run_data_job(
        "synthesize_speech", args, args.input, SpeechConfig, run, show, (CandidateFormatError,)
    )


if __name__ == "__main__":
    sys.exit(main())
