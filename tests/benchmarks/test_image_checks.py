"""Image checks on one core: header-only checks against full decode + checks, in images/s.

    .venv/bin/pytest -m benchmark tests/benchmarks/test_image_checks.py -s

On 200 real JPEGs (100 from coco_mini, 100 from flickr8k_mini; skipped without
../shared/data), in this process pinned to one CPU, no threads. `check_header` is the cheap
pre-check that lets most bad images avoid a full decode; the ratio says how much cheaper it
is than `check` on images that pass it (each one fully decoded). `check` over the whole
mixed set shows what the pre-check saves there (every Flickr8k image is under 400 px).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable

from conceptual.vision.images import ImageFilters

PER_SOURCE = 100
HEADER_ROUNDS = 5  # header checks are fast: repeat them for a steadier figure


def images_per_second(check: Callable[[bytes], object], images: list[bytes], rounds: int = 1):
    started = time.perf_counter()
    for _ in range(rounds):
        for data in images:
            check(data)
    return rounds * len(images) / (time.perf_counter() - started)


def test_image_checks(real_data, record):
    paths = [
        *sorted(real_data.glob("coco_mini/*/*.jpg"))[:PER_SOURCE],
        *sorted(real_data.glob("flickr8k_mini/images/*.jpg"))[:PER_SOURCE],
    ]
    images = [path.read_bytes() for path in paths]
    filters = ImageFilters()
    survivors = [data for data in images if filters.check_header(data)[1] is None]
    reasons = Counter(
        rejection.reason if rejection else "kept" for _, _, rejection in map(filters.check, images)
    )

    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        header = images_per_second(filters.check_header, images, HEADER_ROUNDS)
        full = images_per_second(filters.check, survivors)
        mixed = images_per_second(filters.check, images)
    finally:
        os.sched_setaffinity(0, cpus)

    record(
        "image_checks",
        {
            "images": len(images),
            "header_survivors": len(survivors),
            "outcomes": dict(reasons),
            "check_header_images_per_s": round(header, 1),
            "check_images_per_s_full_decode": round(full, 1),
            "header_to_full_ratio": round(header / full, 1),
            "check_images_per_s_mixed": round(mixed, 1),
        },
    )
    assert reasons["kept"] > 0
