"""Read every caption of a dataset aloud: Conceptual Spoken Captions with espeak-ng.

    python -m conceptual.jobs.synthesize_speech --input URI --output URI [--config FILE] [key=value ...]

INPUT is a curation, import (--curated or not) or features output. OUTPUT gets clips/*.parquet
(16 kHz FLAC clips with their caption, image id, split and drawn voice/rate/pitch/gain),
shards/*.tar (WebDataset), rejected/*.parquet, stats.json and _SUCCESS. A rerun into the same
OUTPUT resumes: finished shards are kept. Overrides use configs/speech.yaml's dotted keys,
e.g. synthesis.seed=1 max_seconds=20 clips_per_shard=256.
"""

from __future__ import annotations

import argparse
import json
import sys

from conceptual.jobs.arguments import add_common, location, report_run
from conceptual.logs import job_output, stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.jobs.synthesize_speech", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--input", required=True, type=location, help="a dataset of captions")
    parser.add_argument("--output", required=True, type=location, help="where clips/ and stats go")
    parser.add_argument(
        "--config", type=location, help="YAML file (configs/speech.yaml shows every key)"
    )
    add_common(parser)
    args = parser.parse_args(argv)
    # Imported here, so that --help and argument errors answer at once.
    from conceptual import funnel, storage
    from conceptual.candidates import CandidateFormatError
    from conceptual.config import ConfigError, load
    from conceptual.pipelines.speech import SpeechConfig, example_clips, run
    from conceptual.runtime import init_ray
    from conceptual.storage import StorageError

    with job_output("synthesize_speech", args.verbose) as log:
        try:
            config = load(SpeechConfig, args.config, args.overrides)
            if not storage.exists(args.input):
                raise StorageError(f"no dataset at {args.input}")
            print(f"synthesize_speech: {args.input} -> {args.output}", flush=True)
            init_ray()
            stats, run_id = run(args.input, args.output, config)
        except (ConfigError, CandidateFormatError, StorageError) as exc:
            print(f"error: {exc}", file=stderr())
            return 2
    print(funnel.render(stats))
    print(f"audio:    {json.dumps(stats['audio'])}")
    for clip in example_clips(args.output, 1):
        parameters = {
            k: round(v, 3) if isinstance(v, float) else v
            for k, v in clip.items()
            if k in ("voice", "rate", "pitch", "gain", "seed", "engine_wpm")
        }
        print(f"example:  {clip['caption']!r} {json.dumps(parameters)}")
    print(f"clips:    {storage.join(args.output, 'clips')}  ({stats['kept']} clips)")
    if stats["input"] > stats["kept"]:
        print(
            f"rejected: {storage.join(args.output, 'rejected')}  ({stats['input'] - stats['kept']})"
        )
    if config.webdataset:
        print(f"shards:   {storage.join(args.output, 'shards')}  (WebDataset)")
    print(f"stats:    {storage.join(args.output, 'stats.json')}")
    report_run(run_id, config.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
