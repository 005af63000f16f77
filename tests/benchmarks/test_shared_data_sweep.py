"""Issue 59's stages over every text and photo of ../shared/data and generated variants
(BENCHMARKS.md, "Every text and photo of ../shared/data through issue 59's stages"):

- the learned alignment scorer (ABLATION_SCORER, or train_contrastive's on the Flickr8k
  photos the ablation leaves over) scores every caption of the shared data, each with a
  photo drawn at random, and generated variants: every score finite and a cosine, and a
  text scored alone as in its batch;
- near-duplicates among every shared photo once (no copies): the pairs merged at the
  default threshold, and the closest two distinct photos, printed.

    .venv/bin/python -m pytest -p no:cacheprovider -m benchmark tests/benchmarks/test_shared_data_sweep.py -s
"""

from __future__ import annotations

import csv
import json
import os
import random

import numpy as np
import pytest
from ablation_inputs import scorer  # tests/ablation_inputs.py

from conceptual.pipelines.curation.near_duplicates import NearDedupConfig, close_pairs, unit_vectors
from conceptual.vision.alignment import load_scorer

pytestmark = [pytest.mark.benchmark, pytest.mark.realdata]
ABLATION_PHOTOS = 350  # the ablation's candidates and held-out photos: not the scorer's


def shared_texts(data) -> dict[str, list[str]]:
    texts = {
        "flickr8k": [
            r["caption"] for r in csv.DictReader(open(data / "flickr8k_mini/captions.csv"))
        ]
    }
    for name in ("captions_train2017.json", "captions_val2017.json"):
        annotations = json.loads((data / "coco_mini" / name).read_text())["annotations"]
        texts[f"coco {name}"] = [a["caption"] for a in annotations]
    tsv = {"delimiter": "\t"}
    texts["cc_val"] = [
        r["caption"] for r in csv.DictReader(open(data / "cc_val_captions.tsv"), **tsv)
    ]
    slugs = csv.DictReader(open(data / "cc_val_slug_pairs_dev.tsv"), **tsv)
    texts["slug pairs"] = [text for row in slugs for text in row.values()]
    for path in sorted((data / "flickr8k_cn").glob("*caption*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines()
        texts[f"flickr8k_cn {path.name}"] = [line.split(" ", 1)[-1].strip() for line in lines]
    texts["generated variants"] = variants(texts["flickr8k"][:200])
    return texts  # fmt: skip


def variants(captions: list[str]) -> list[str]:
    """Names, model numbers, dates, brackets and markup, case, whitespace, emoji, other
    scripts, invisible marks, repetition; then texts no caption should be."""
    made = []
    for c in captions:
        made += [
            f"{c} by John O'Neill-Smith", f"Sony WH-1000XM4 {c}", f"{c} on 2024-03-15",
            f"{c} (1999)", f"[{c}]", f"{{{c}}} <b>{c}</b>", c.upper(), c.replace(" ", "  \t "),
            f"{c} 🐕🎉", f"Ёлка {c}", f"كلب {c}", f"犬 {c}", f"कुत्ता {c}",
            f"{c} \u200b\u200e\u202e", c * 50,
        ]  # fmt: skip
    odd = ["", " ", "\n", ".", "a", "0" * 10_000, "x" * 1_000_000, "\x00\x01\x02", "<img src=x>"]
    return made + odd + ["😀" * 500]


def test_every_shared_text_and_photo(platform_home, real_data, tmp_path):
    from test_near_duplicates import embedded_rows, shared_photos

    photos = shared_photos(real_data)
    rows = embedded_rows([(p.name, p.read_bytes()) for p in photos])  # each photo decodes
    assert rows.num_rows == len(photos)
    default = NearDedupConfig()
    pairs = close_pairs(rows, default.threshold, default.mirrored)
    x = unit_vectors(rows["embedding"])
    cosine = x @ x.T
    np.fill_diagonal(cosine, -1)
    merged = pairs.select(["a_id", "b_id", "cosine", "mirrored"]).to_pylist()
    print(f"\n{rows.num_rows} photos; merged at {default.threshold}: {merged}")
    print(f"closest two distinct photos: {cosine.max():.3f}")

    uri = os.environ.get("ABLATION_SCORER") or scorer(real_data, tmp_path, skip=ABLATION_PHOTOS)
    model = load_scorer(uri)
    vectors = np.stack(rows["embedding"].to_numpy(zero_copy_only=False)).astype(np.float32)
    rng = random.Random(0)
    for name, texts in shared_texts(real_data).items():
        images = vectors[np.random.default_rng(0).integers(0, len(vectors), len(texts))]
        scores = model.score(images, texts)
        bad = [texts[i][:80] for i in np.flatnonzero(~(np.abs(scores) <= 1 + 1e-5))]
        assert not bad, f"{name}: scores that are no cosine for {bad[:5]}"
        sample = rng.sample(range(len(texts)), min(20, len(texts)))
        alone = np.array([model.score(images[i : i + 1], [texts[i]])[0] for i in sample])
        np.testing.assert_allclose(alone, scores[sample], atol=1e-5)
        print(f"{name}: {len(texts)} texts, scores {scores.min():.3f} .. {scores.max():.3f}")
