import pytest

from conceptual import funnel
from conceptual.funnel import length_statistics

STAGES = ("read", "text", "syntax")


def test_build_orders_stages_and_accounts():
    stats = funnel.build(
        100,
        40,
        {"text": {"url": 30, "empty": 10}, "read": {"malformed_row": 5}, "syntax": {"no_noun": 15}},
        STAGES,
    )
    assert [(r["stage"], r["entering"], r["leaving"]) for r in stats["funnel"]] == [
        ("read", 100, 95),
        ("text", 95, 55),
        ("syntax", 55, 40),
    ]
    assert list(stats["rejected"]["text"]) == ["url", "empty"]  # most frequent first


def test_accounting_mismatch_is_an_error():
    with pytest.raises(funnel.AccountingError, match="input 100"):
        funnel.build(100, 41, {"text": {"url": 60}}, STAGES)
    with pytest.raises(funnel.AccountingError, match="unknown stages"):
        funnel.build(10, 5, {"bogus": {"x": 5}}, STAGES)


def test_render_and_plot(tmp_path):
    stats = funnel.build(10, 4, {"text": {"url": 6}}, STAGES)
    text = funnel.render(stats)
    assert "url" in text and "kept 4 of 10 (40.0%)" in text
    funnel.plot(stats, tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_length_statistics_exact():
    # lengths 1, 2, 2, 3, 10
    stats = length_statistics({1: 1, 2: 2, 3: 1, 10: 1})
    assert stats["count"] == 5 and stats["tokens_mean"] == 3.6 and stats["tokens_median"] == 2
    assert length_statistics({4: 1, 6: 1})["tokens_median"] == 5
    assert length_statistics({})["count"] == 0


def test_kept_samples_grid(tmp_path):
    import io

    from PIL import Image

    from conceptual.funnel import plot_kept_samples

    buffer = io.BytesIO()
    Image.new("RGB", (640, 480), "orange").save(buffer, "JPEG")
    record = {"image": buffer.getvalue(), "caption": "a cup of espresso", "labels": []}
    assert plot_kept_samples([record] * 5, tmp_path / "grid.png")
    with Image.open(tmp_path / "grid.png") as grid:
        assert grid.size[0] > 0
    assert not plot_kept_samples([{**record, "image": None}], tmp_path / "none.png")


def test_table_3_per_split_from_the_caption_tallies():
    """Conceptual Captions Table 3 for each split: examples, unique tokens, tokens per caption
    mean/std/median, from the tallies of two batches (partial counts, summed)."""
    import pyarrow as pa

    from conceptual.pipelines.dataflow.rows import caption_tally

    first = pa.table({"caption": ["a dog runs", "a cat"], "split": ["train", "test"]})
    second = pa.table({"caption": ["dog on a sofa", "a cat sits"], "split": ["train", "test"]})
    tallies = funnel.tally(pa.concat_tables([caption_tally(first), caption_tally(second)]))
    stats = funnel.caption_statistics(tallies)
    assert stats["captions_by_split"] == {
        "test": {
            "examples": 2,
            "unique_tokens": 3,  # a, cat, sits
            "tokens_mean": 2.5,
            "tokens_std": 0.5,
            "tokens_median": 2.5,
        },
        "train": {
            "examples": 2,
            "unique_tokens": 5,  # a, dog, runs, on, sofa
            "tokens_mean": 3.5,
            "tokens_std": 0.5,
            "tokens_median": 3.5,
        },
    }
    assert stats["captions"]["count"] == 4 and stats["captions"]["vocabulary_size"] == 7
