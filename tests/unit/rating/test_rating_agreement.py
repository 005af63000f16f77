"""Fleiss' kappa and Krippendorff's alpha against textbook examples worked by hand."""

from __future__ import annotations

import pytest

from conceptual.rating.agreement import fleiss_kappa, interval, krippendorff_alpha


def test_fleiss_kappa_of_three_raters_worked_by_hand():
    # Three raters, two categories. Per subject P_i = sum_j n_ij (n_ij - 1) / (n (n - 1)):
    #   GGG: (3*2 + 0) / 6 = 1;  GGB: (2*1 + 1*0) / 6 = 1/3;  GBB: (0 + 2*1) / 6 = 1/3
    # mean P = (1 + 1/3 + 1/3) / 3 = 5/9; p_G = 6/9, p_B = 3/9, P_e = 4/9 + 1/9 = 5/9
    # kappa = (5/9 - 5/9) / (1 - 5/9) = 0: exactly the agreement chance gives.
    assert fleiss_kappa([["G"] * 3, ["G", "G", "B"], ["G", "B", "B"]]) == pytest.approx(0.0)
    # GGG and BBB: mean P = 1, P_e = 1/4 + 1/4 = 1/2, kappa = (1 - 1/2) / (1 - 1/2) = 1.
    assert fleiss_kappa([["G"] * 3, ["B"] * 3]) == pytest.approx(1.0)
    # GB, GB: mean P = 0, P_e = 1/2, kappa = (0 - 1/2) / (1/2) = -1.
    assert fleiss_kappa([["G", "B"], ["B", "G"]]) == pytest.approx(-1.0)


def test_fleiss_kappa_of_fleiss_textbook_table():
    # Fleiss (1971) as Wikipedia works it: 10 subjects, 14 raters, 5 categories.
    # p_j = 0.143, 0.200, 0.279, 0.150, 0.229 -> P_e = 0.213; the P_i are 1.000, 0.253,
    # 0.308, 0.440, 0.330, 0.462, 0.242, 0.176, 0.286, 0.286 -> mean P = 0.378;
    # kappa = (0.378 - 0.213) / (1 - 0.213) = 0.210.
    counts = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    subjects = [[c for c, n in enumerate(row) for _ in range(n)] for row in counts]
    assert fleiss_kappa(subjects) == pytest.approx(0.2099, abs=1e-4)


def test_fleiss_kappa_is_undefined_without_pairs_or_variation():
    assert fleiss_kappa([["G"], ["B"]]) is None  # one rating per subject: no agreement to see
    assert fleiss_kappa([["G", "G"], ["G", "G"]]) is None  # P_e = 1


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four
# observers, twelve units, values 1-5, missing values blank. Unit 12 has one value and
# is not pairable.
KRIPPENDORFF = [
    [1, 1, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [5, 5, 5],
    [1, 1],
    [3],
]


def nominal(a: float, b: float) -> float:
    return 0.0 if a == b else 1.0


def test_krippendorff_alpha_nominal_of_the_textbook_example():
    # Coincidences o_ck (each unit's m(m-1) ordered pairs weighted 1/(m-1)); their marginals
    # n_1..n_5 = 9, 13, 10, 5, 3 (n = 40), diagonal 7 + 10 + 8 + 4 + 3 = 32, so the
    # off-diagonal coincidences sum to 40 - 32 = 8. Expected: sum_{c != k} n_c n_k =
    # n^2 - sum n_c^2 = 1600 - 384 = 1216.
    # alpha = 1 - (n - 1) * 8 / 1216 = 1 - 312 / 1216 = 0.743.
    assert krippendorff_alpha(KRIPPENDORFF, nominal) == pytest.approx(0.7434, abs=1e-4)


def test_krippendorff_alpha_interval_of_the_textbook_example():
    # Off-diagonal coincidences (both orders) times (c - k)^2: (1,2) 2*4/3*1, (1,3) 2*1/3*4,
    # (1,4) 2*1/3*9, (2,3) 2*4/3*1, (2,4) 2*1/3*4, (3,4) 2*1/3*1 -> 52/3, D_o = 52/3 / 40.
    # sum_{c<k} n_c n_k (c - k)^2 = 117 + 360 + 405 + 432 + 130 + 260 + 351 + 50 + 120 + 15
    # = 2240, D_e = 2 * 2240 / (40 * 39) = 4480 / 1560.
    # alpha = 1 - (52/120) / (4480/1560) = 1 - 0.1509 = 0.849.
    assert krippendorff_alpha(KRIPPENDORFF, interval) == pytest.approx(0.8491, abs=1e-4)


def test_krippendorff_alpha_of_a_small_scale_worked_by_hand():
    # Units [4,5], [3,3], [1,2]: coincidences (4,5), (5,4), (3,3) twice, (1,2), (2,1), n = 6;
    # D_o = (1 + 1 + 0 + 0 + 1 + 1) / 6 = 2/3. Values 1, 2, 3, 3, 4, 5: sum over value pairs
    # c < k of n_c n_k (c - k)^2 = 1 + 8 + 9 + 16 + 2 + 4 + 9 + 2 + 8 + 1 = 60, D_e =
    # 2 * 60 / (6 * 5) = 4; alpha = 1 - (2/3) / 4 = 5/6.
    assert krippendorff_alpha([[4, 5], [3, 3], [1, 2]]) == pytest.approx(5 / 6)
    assert krippendorff_alpha([[3, 3], [3, 3]]) is None  # no variation: D_e = 0
    assert krippendorff_alpha([[3], [4]]) is None  # nothing pairable
