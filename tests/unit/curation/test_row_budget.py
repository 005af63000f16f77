"""One memory budget for any single row (limits.row_bytes, conceptual/limits.py): the
reader's line limit comes from it, and a config whose fetch or decode limit would let one
row take more is refused when it is loaded, naming both keys."""

from __future__ import annotations

import pytest

from conceptual.config import ConfigError, load
from conceptual.limits import LINE_BYTES, ROW_BYTES
from conceptual.pipelines.curation.curation_config import CurationConfig, ImportConceptualConfig


def test_the_shipped_limits_fit_the_budget():
    for kind in (CurationConfig, ImportConceptualConfig):
        config = load(kind)
        assert config.limits.row_bytes == ROW_BYTES
        assert config.fetch.max_bytes <= ROW_BYTES
        assert config.image.max_pixels * 4 <= ROW_BYTES
        assert config.limits.line_bytes == LINE_BYTES


def test_a_smaller_budget_lowers_the_line_limit():
    small = [f"limits.row_bytes={2 << 20}", f"fetch.max_bytes={1 << 20}", "image.max_pixels=500000"]
    config = load(CurationConfig, None, small)
    assert config.limits.line_bytes == 2 << 20


@pytest.mark.parametrize(
    "overrides, key",
    [
        ([f"fetch.max_bytes={512 << 20}"], "fetch.max_bytes"),
        (["image.max_pixels=80000000"], "image.max_pixels"),
        ([f"limits.row_bytes={8 << 20}"], "fetch.max_bytes"),
        ([f"limits.row_bytes={32 << 20}"], "image.max_pixels"),
    ],
)
def test_a_limit_over_the_budget_is_refused_naming_both_keys(overrides, key):
    with pytest.raises(ConfigError, match=rf"{key} lets one row take .* over limits.row_bytes"):
        load(CurationConfig, None, overrides)


def test_a_budget_under_a_mebibyte_is_refused():
    with pytest.raises(ConfigError, match="limits.row_bytes"):
        load(CurationConfig, None, ["limits.row_bytes=1000"])
