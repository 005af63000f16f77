"""Agreement between raters beyond chance.

Fleiss' kappa (Fleiss 1971) for categories: subjects may have different numbers of raters
(the usual generalization, P_i = sum_j n_ij (n_ij - 1) / (n_i (n_i - 1))); subjects with one
rating carry no agreement and are left out. Krippendorff's alpha (Krippendorff 2011,
"Computing Krippendorff's Alpha-Reliability") for values with a distance, from the
coincidence matrix: alpha = 1 - D_o / D_e, with any number of raters per unit and missing
values. Both are None where they are undefined (no pairable ratings, or no variation at all).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence


def fleiss_kappa(subjects: Sequence[Sequence[Hashable]]) -> float | None:
    """Each subject's ratings (categories, one per rater)."""
    rated = [Counter(ratings) for ratings in subjects if len(ratings) >= 2]
    if not rated:
        return None
    total = sum(sum(c.values()) for c in rated)
    shares: Counter[Hashable] = Counter()
    for counts in rated:
        shares.update(counts)
    expected = sum((n / total) ** 2 for n in shares.values())
    observed = sum(
        sum(n * (n - 1) for n in c.values()) / (sum(c.values()) * (sum(c.values()) - 1))
        for c in rated
    ) / len(rated)
    if expected == 1:
        return None  # every rating the same category: agreement is not measurable
    return (observed - expected) / (1 - expected)


def interval(a: float, b: float) -> float:
    return (a - b) ** 2


def krippendorff_alpha(
    units: Sequence[Sequence[float]], distance: Callable[[float, float], float] = interval
) -> float | None:
    """Each unit's values (one per rater who rated it; missing ones simply absent)."""
    pairable = [values for values in units if len(values) >= 2]
    coincidences: Counter[tuple[float, float]] = Counter()
    for values in pairable:
        m = len(values)
        for i, a in enumerate(values):
            for j, b in enumerate(values):
                if i != j:
                    coincidences[a, b] += 1 / (m - 1)
    n = sum(coincidences.values())
    if n <= 1:
        return None
    marginals: Counter[float] = Counter()
    for (a, _), count in coincidences.items():
        marginals[a] += count
    observed = sum(count * distance(a, b) for (a, b), count in coincidences.items()) / n
    expected = _expected(marginals, n, distance)
    return None if expected == 0 else 1 - observed / expected


def _expected(
    marginals: Mapping[float, float], n: float, distance: Callable[[float, float], float]
) -> float:
    return sum(
        na * nb * distance(a, b) for a, na in marginals.items() for b, nb in marginals.items()
    ) / (n * (n - 1))
