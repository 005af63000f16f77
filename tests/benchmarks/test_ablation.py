"""The ablation at benchmark size (BENCHMARKS.md, "Choosing a curation"): Flickr8k photos with
their captions and the demo's generated noise alt-texts as the candidates, other Flickr8k
photos as the held-out set, examples/ablate_flickr8k.yaml's variants (or ABLATION_CONFIG's),
a contrastive model each; the table printed.

    ABLATION_OUT=/tmp/ablation .venv/bin/python -m pytest -m benchmark -s \
        tests/benchmarks/test_ablation.py

ABLATION_CANDIDATES and ABLATION_HELD_OUT: photos (default 200 and 150, of the 798);
ABLATION_NOISE: generated candidates per caption (0.5); ABLATION_EPOCHS (10). The alignment
variants' scorer is ABLATION_SCORER's, or train_contrastive's on the remaining photos (neither
candidates nor held out). With ABLATION_OUT the inputs, the scorer and the variants'
curations stay there: a rerun reuses them (the pipeline's fingerprints) and trains and
scores again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ablation_inputs import imported, scorer  # tests/ablation_inputs.py

pytestmark = [pytest.mark.benchmark, pytest.mark.realdata]


def test_ablation_on_the_shared_photos(platform_home, real_data, repo, tmp_path):
    # The jobs start Ray themselves, or join RAY_ADDRESS's (a head started beforehand).
    from conceptual.jobs import ablate

    root = Path(os.environ.get("ABLATION_OUT") or tmp_path)
    sizes = {
        "candidates": int(os.environ.get("ABLATION_CANDIDATES", 200)),
        "held_out": int(os.environ.get("ABLATION_HELD_OUT", 150)),
        "noise": float(os.environ.get("ABLATION_NOISE", 0.5)),
    }
    made = root / "inputs.json"
    if made.exists() and json.loads(made.read_text())["sizes"] == sizes:
        candidates, eval_features = json.loads(made.read_text())["paths"]
    else:
        candidates, eval_features = imported(real_data, root / "inputs", **sizes)
        made.write_text(json.dumps({"sizes": sizes, "paths": [candidates, eval_features]}))
    used = sizes["candidates"] + sizes["held_out"]
    scorer_uri = os.environ.get("ABLATION_SCORER") or scorer(real_data, root, skip=used)
    config = os.environ.get("ABLATION_CONFIG") or repo / "examples" / "ablate_flickr8k.yaml"
    args = [
        "--config",
        str(config),
        f"input={candidates}",
        f"eval_features={eval_features}",
        f"output={root / 'out'}",
        f"train.epochs={os.environ.get('ABLATION_EPOCHS', 10)}",
        f"curate.alignment.scorer={scorer_uri}",
        "experiment=benchmark-ablation",
    ]
    assert ablate.main(args) == 0
    rows = json.loads((root / "out" / "ablation.json").read_text())
    assert len({row["eval_set"] for row in rows}) == 1  # one held-out set for every model
    print((root / "out" / "ablation.md").read_text())
