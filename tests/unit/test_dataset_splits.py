import pytest

from conceptual.splits import SplitConfig, assign_split


def test_same_image_same_split():
    config = SplitConfig()
    assert {assign_split(b"jpeg bytes", config) for _ in range(5)} == {
        assign_split(b"jpeg bytes", config)
    }


def test_fractions_are_respected():
    config = SplitConfig(train=0.8, val=0.1, test=0.1)
    counts = {"train": 0, "val": 0, "test": 0}
    for i in range(20000):
        counts[assign_split(i.to_bytes(4, "big"), config)] += 1
    assert counts["train"] / 20000 == pytest.approx(0.8, abs=0.015)
    assert counts["val"] / 20000 == pytest.approx(0.1, abs=0.01)
    assert counts["test"] / 20000 == pytest.approx(0.1, abs=0.01)


def test_a_zero_fraction_is_never_chosen():
    config = SplitConfig(train=1.0, val=0.0, test=0.0)
    assert {assign_split(i.to_bytes(4, "big"), config) for i in range(1000)} == {"train"}


@pytest.mark.parametrize("fractions", [{"train": 0.9, "val": 0.2}, {"train": -0.1, "val": 1.1}])
def test_fractions_must_sum_to_one(fractions):
    with pytest.raises(ValueError):
        SplitConfig(**fractions)
