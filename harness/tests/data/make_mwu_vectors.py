#!/usr/bin/python3
"""Reference vectors for perfgate's Mann-Whitney U (harness/tests/stats_test.cpp).

Run ONCE with a Python that has scipy (here: /usr/bin/python3, scipy 1.10.1):
    /usr/bin/python3 harness/tests/data/make_mwu_vectors.py > harness/tests/data/mwu_vectors.json
The output is committed; the tests never run Python.
Cases: sample sizes 2..50 (both sides, unequal too), continuous data (no ties), heavily tied data
(values rounded to a coarse grid), all-equal samples, shifted and unshifted, the three alternatives,
and methods auto / exact / asymptotic (with and without continuity correction).
"""
import json
import sys

import numpy as np
import scipy
from scipy import stats

rng = np.random.default_rng(20261122)
cases = []


def add(x, y, alternative, method, continuity=True):
    res = stats.mannwhitneyu(x, y, use_continuity=continuity, alternative=alternative, method=method)
    cases.append({
        "x": [float(v) for v in x],
        "y": [float(v) for v in y],
        "alternative": alternative,
        "method": method,
        "continuity": continuity,
        "u1": float(res.statistic),
        "p": float(res.pvalue),
    })


sizes = [(2, 2), (2, 3), (3, 3), (2, 9), (4, 4), (5, 7), (8, 8), (8, 20), (3, 50), (9, 9), (10, 12),
         (15, 15), (20, 20), (7, 30), (25, 18), (30, 30), (40, 35), (50, 50), (12, 50), (50, 6)]
alternatives = ["two-sided", "less", "greater"]
for i, (n1, n2) in enumerate(sizes):
    for shift in (0.0, 0.4, 1.5):
        x = rng.normal(1.0, 0.3, n1)
        y = rng.normal(1.0 + shift * 0.3, 0.3, n2)
        alt = alternatives[(i + int(shift * 10)) % 3]
        # continuous: 'auto' (exact when min(n) <= 8), and the other method explicitly
        add(x, y, alt, "auto")
        add(x, y, "two-sided", "auto")
        if n1 * n2 <= 2500:
            add(x, y, alt, "exact")
        add(x, y, alt, "asymptotic", continuity=(shift != 0.4))
        # ties: round to a coarse grid so many values coincide
        xt = np.round(x * 5) / 5
        yt = np.round(y * 5) / 5
        add(xt, yt, alt, "auto")
        add(xt, yt, "two-sided", "auto")
        add(xt, yt, alt, "asymptotic", continuity=False)
# every n from 2 to 50 on one side, ties and no ties, two-sided auto (what perfgate uses)
for n in range(2, 51):
    m = int(rng.integers(2, 51))
    x = rng.lognormal(0.0, 0.05, n)
    y = rng.lognormal(0.03, 0.05, m)
    add(x, y, "two-sided", "auto")
    add(np.round(x, 2), np.round(y, 2), "two-sided", "auto")
# degenerate: all values equal (p = 1), one side entirely above the other
add([1.0] * 5, [1.0] * 6, "two-sided", "auto")
add([1.0] * 12, [1.0] * 12, "two-sided", "auto")
add([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], "two-sided", "auto")
add(list(range(1, 21)), list(range(21, 41)), "two-sided", "auto")
add(list(range(1, 21)), list(range(21, 41)), "less", "exact")

json.dump({"generator": "harness/tests/data/make_mwu_vectors.py", "scipy": scipy.__version__,
           "numpy": np.__version__, "cases": cases}, sys.stdout, indent=None, separators=(",", ":"))
sys.stdout.write("\n")
