"""Figures the runs log to MLflow. Built on matplotlib's Figure, not pyplot: no GUI backend
and no global figure state, so they are safe in Ray workers and threads."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence
from functools import cache

from matplotlib import font_manager
from matplotlib.figure import Figure
from PIL import Image

# Titles fall back glyph by glyph from the default font to one with Han characters
# (requirements/apt.txt installs it), so Chinese captions do not show as empty boxes.
CJK_FONT = "WenQuanYi Micro Hei"


@cache
def title_fonts() -> list[str]:
    """The default sans-serif font, then the CJK one when this machine has it (without it,
    matplotlib would warn on every title)."""
    fonts = ["DejaVu Sans"]
    try:
        font_manager.findfont(CJK_FONT, fallback_to_default=False)
        fonts.append(CJK_FONT)
    except ValueError:
        pass
    return fonts


def image_grid(items: Sequence[tuple[bytes, str]], columns: int = 4, wrap: int = 40) -> Figure:
    """Photos (encoded bytes) each titled with its text, `columns` to a row."""
    if not items:
        raise ValueError("an image grid needs at least one image")
    columns = min(columns, len(items))
    rows = -(-len(items) // columns)
    figure = Figure(figsize=(4 * columns, 4.5 * rows))
    axes = figure.subplots(rows, columns, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, (data, title) in zip(axes.flat, items):
        image = Image.open(io.BytesIO(data))
        image.draft("RGB", (256, 256))  # a thumbnail needs no full-size decode
        ax.imshow(image.convert("RGB"))
        lines = [textwrap.fill(line, wrap) for line in title.splitlines()]
        ax.set_title("\n".join(lines), fontsize=8, loc="left", fontfamily=title_fonts())
    figure.tight_layout()
    return figure
