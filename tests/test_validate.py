"""Validation once per entry point, before any I/O (lswmkc_dask/_validate.py).

Each entry point is given an input that does not exist: a parameter checked before the
input is read is named in the error (a check after the read would meet the missing file
first), and the output directory is never made.
"""

from __future__ import annotations

import pytest

from lswmkc_dask import LSWMKC, sweep
from lswmkc_dask._validate import validate, validated
from lswmkc_dask.grid.baselines import avg_kkm, knn_kkm
from lswmkc_dask.cli import main
from lswmkc_dask.grid.compare import compare
from lswmkc_dask.errors import ParameterError

#: (entry point, its call on a missing input, the parameter named in the error)
BAD_CALLS = [
    ("LSWMKC", lambda x, out: LSWMKC(15, gamma=-1.0).fit(x), "gamma"),
    ("LSWMKC", lambda x, out: LSWMKC(15, alpha=2e300).fit(x), "alpha"),
    ("LSWMKC", lambda x, out: LSWMKC(15, max_iter=10, min_iter=30).fit(x), "min_iter"),
    ("LSWMKC", lambda x, out: LSWMKC(15, n_init=0).fit(x), "n_init"),
    ("sweep", lambda x, out: sweep(x, out, alphas=[1.0, -1.0], progress=False), "alpha"),
    ("sweep", lambda x, out: sweep(x, out, gammas=["auto", 0.0], progress=False), "gamma"),
    ("sweep", lambda x, out: sweep(x, out, max_iter=5, min_iter=6, progress=False), "min_iter"),
    ("compare", lambda x, out: compare(x, out, alphas=[float("inf")], progress=False), "alpha"),
    ("compare", lambda x, out: compare(x, out, max_iter=5, min_iter=6, progress=False), "min_iter"),
    ("baselines", lambda x, out: avg_kkm(x, n_init=0), "n_init"),
    ("baselines", lambda x, out: knn_kkm(x, eig_threads=0), "eig_threads"),
    ("baselines", lambda x, out: avg_kkm(x, degenerate_kernels="ignore"), "degenerate_kernels"),
]


@pytest.mark.parametrize("entry, call, name", BAD_CALLS, ids=[f"{e}-{n}" for e, _, n in BAD_CALLS])
def test_entry_points_refuse_before_any_io(entry, call, name, tmp_path):
    missing, out = tmp_path / "missing.zarr", tmp_path / "out"
    with pytest.raises(ParameterError) as info:
        call(missing, out)
    assert info.value.parameter == name, str(info.value)
    assert not out.exists() and sorted(tmp_path.iterdir()) == []


def test_baseline_errors_name_the_function(tmp_path):
    with pytest.raises(ParameterError, match="'n_init' parameter of knn_kkm"):
        knn_kkm(tmp_path / "missing.zarr", n_init=0)


def test_command_line_checks_against_n_before_the_output(tmp_path, capsys):
    """``lswmkc fit``: k >= n refused (after the input is read, before the header and any output)."""
    out = tmp_path / "out"
    assert main(["fit", "--dataset", "yale", "--n-clusters", "165", "--output", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--n-clusters must be an integer in [2, n_samples - 1 = 164], got 165" in err, err
    assert "LSWMKC on" not in err and not out.exists()


def test_checks_against_n():
    validate("sweep", {"n_clusters": [2, 3], "n_neighbors": [1, 8]}, n_samples=10)
    with pytest.raises(ParameterError, match=r"n_clusters must be an integer in \[2, n_samples - 1 = 9\], got 10"):
        validate("sweep", {"n_clusters": [2, 10]}, n_samples=10)
    with pytest.raises(ParameterError, match=r"n_neighbors must be an integer in \[1, n_samples - 2 = 8\], got 9"):
        validate("LSWMKC", {"n_clusters": 3, "n_neighbors": 9}, n_samples=10)


def test_grids_given_as_arrays():
    import numpy as np

    validate("sweep", {"alphas": np.logspace(0, 3, 4), "gammas": ("auto", 0.5)})
    with pytest.raises(ParameterError, match="alpha"):
        validate("sweep", {"alphas": np.array([1.0, np.nan])})


def test_nested_entry_point_is_not_validated_again():
    """Inside validated() (an entry point called by another, which validated), nothing is
    checked; outside, and after it, the same call is refused."""
    bad = {"n_init": 0, "max_iter": 5, "min_iter": 6}
    with validated():
        validate("sweep", bad)
        validate("LSWMKC", {"n_clusters": 99}, n_samples=10)
    with pytest.raises(ParameterError):
        validate("sweep", bad)


def test_unknown_entry_point():
    with pytest.raises(ValueError, match="entry must be one of"):
        validate("fit", {})
