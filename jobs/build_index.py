"""Build a retriever's search index: embed a features output's images and captions (or
clips) with a dual encoder, for the search service.

    python -m conceptual.jobs.build_index --model MODEL_URI --data FEATURES --output URI
        [--speech URI] [--config FILE] [key=value ...]

MODEL_URI: models:/retriever-text@champion, models:/retriever-speech/3, runs:/<run id>/model
or a local model directory. FEATURES is a features job's output (every split, or
splits=[train,val]); SPEECH (speech models) the clips to index besides the images. OUTPUT
gets index.json, images/captions(/clips) .parquet and .npy files and, with
approximate=true, a FAISS index per target and its recall@10 against exact search
(faiss.kind=ivf|hnsw, faiss.nprobe=..., recall_queries=...). A registered version is tagged
index=OUTPUT: the search service serves the champion with the index its tag names. A row
whose embedding raises goes to OUTPUT/rejected/*.parquet (reason internal_error); more than
errors.max_rate of the rows (or errors.max_count) fails the job (exit 1), without an index.
"""

from __future__ import annotations

import json
import sys

from conceptual.jobs.arguments import JobParser, add_config, add_model, location, output
from conceptual.jobs.runner import Stopped, job_main, job_run, report_run


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("build_index", __doc__, keys="build_index.yaml")
    add_model(parser)
    parser.add_argument("--data", required=True, type=location, help="a features job's output")
    parser.add_argument("--output", required=True, type=output, help="where the index goes")
    parser.add_argument("--speech", type=location, help="clips to index (speech models)")
    add_config(parser, "BuildIndexConfig", "approximate=true splits=[test]")
    args = parser.parse_args(argv)
    from conceptual import storage
    from conceptual.config import load
    from conceptual.errors import TooManyErrors
    from conceptual.pipelines.retrieval.build_index import BuildIndexConfig, run
    from conceptual.storage import StorageError

    with job_run("build_index", args.verbose, output=args.output) as log:  # unknown model, bad data
        config = load(BuildIndexConfig, args.config, args.overrides)
        for uri in (args.data, args.speech):
            if uri is not None and not storage.exists(uri):
                raise StorageError(f"no input data at {uri}")
        print(f"build_index: {args.model} over {args.data} -> {args.output}", flush=True)
        try:
            result = run(args.model, args.data, args.output, config, speech_uri=args.speech)
        except TooManyErrors as exc:  # rows failed past errors.*: the system, not the data
            raise Stopped(f"{exc}. {args.output} holds no index.", code=1) from None
    print(json.dumps(result, indent=2))
    report_run(result["run_id"], config.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
