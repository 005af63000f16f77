"""The caption metrics on human captions: each Flickr8k-mini image's first caption scored
against its other four (leave-one-out), the human agreement a captioner is compared with.
Also checks our Java-free tokenizer against pycocoevalcap's PTBTokenizer when Java is here."""

from __future__ import annotations

import csv
import shutil
from collections import defaultdict

import pytest

from conceptual.metrics import caption_scores, coco_tokenize

pytestmark = [pytest.mark.integration, pytest.mark.realdata]

has_java = shutil.which("java") is not None


@pytest.fixture(scope="module")
def flickr_captions(real_data) -> dict[str, list[str]]:
    """Image name -> its five human captions."""
    captions: dict[str, list[str]] = defaultdict(list)
    with open(real_data / "flickr8k_mini" / "captions.csv", newline="") as f:
        for row in csv.DictReader(f):
            captions[row["image"]].append(row["caption"])
    return dict(captions)


def test_leave_one_out_human_captions_score_in_sane_ranges(flickr_captions):
    hypotheses = {image: captions[0] for image, captions in flickr_captions.items()}
    references = {image: captions[1:] for image, captions in flickr_captions.items()}
    scores = caption_scores(hypotheses, references)
    print("flickr8k_mini leave-one-out:", scores)

    assert scores["count"] == len(flickr_captions) == 798
    assert 0.3 < scores["CIDEr"] < 2.0
    assert 0.4 < scores["BLEU-1"] < 0.9 and 0.05 < scores["BLEU-4"] < 0.5
    assert 0.3 < scores["ROUGE-L"] < 0.8
    if has_java:
        assert 0.15 < scores["METEOR"] < 0.5
    else:
        assert scores["METEOR"] is None and "Java" in scores["unavailable"]["METEOR"]
    if scores["SPICE"] is None:
        assert scores["unavailable"]["SPICE"]
    else:
        assert 0.1 < scores["SPICE"] < 0.5


@pytest.mark.skipif(not has_java, reason="pycocoevalcap's PTBTokenizer needs java")
def test_coco_tokenize_agrees_with_pycocoevalcap_ptb_tokenizer(flickr_captions):
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    captions = [c for image_captions in flickr_captions.values() for c in image_captions]
    ptb = PTBTokenizer().tokenize({i: [{"caption": c}] for i, c in enumerate(captions)})
    disagreements = [c for i, c in enumerate(captions) if coco_tokenize(c) != ptb[i][0]]
    assert len(disagreements) <= len(captions) // 100, disagreements[:10]
