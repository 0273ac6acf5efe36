"""methods._qp.simplex_qp: the exact active-set QP of the weight steps (MKKM-MR, LKAM, ONKC)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from lswmkc_dask.methods._qp import simplex_qp


def _value(q, f, x):
    return 0.5 * x @ q @ x + f @ x


def _enumerate(q, f, total, lower, upper):
    """Exact minimum by KKT enumeration: every (lower, free, upper) pattern, the face's
    stationary point where its KKT system is non-singular, the best feasible one."""
    m = len(f)
    best = np.inf
    for pattern in itertools.product((-1, 0, 1), repeat=m):
        st = np.array(pattern)
        fixed, free = np.flatnonzero(st != 0), np.flatnonzero(st == 0)
        x = np.where(st == -1, lower, upper).astype(float)
        if not np.isfinite(x[fixed]).all():
            continue
        rhs = -(f[free] + q[np.ix_(free, fixed)] @ x[fixed])
        if total is None:
            system = q[np.ix_(free, free)]
        else:
            k = len(free)
            system = np.zeros((k + 1, k + 1))
            system[:k, :k] = q[np.ix_(free, free)]
            system[:k, k] = system[k, :k] = 1.0
            rhs = np.append(rhs, total - x[fixed].sum())
        if len(rhs):
            try:
                x[free] = np.linalg.solve(system, rhs)[: len(free)]
            except np.linalg.LinAlgError:
                continue
        elif total is not None and abs(x.sum() - total) > 1e-12:
            continue
        if (x >= lower - 1e-12).all() and (x <= upper + 1e-12).all():
            best = min(best, _value(q, f, x))
    return best


def _kkt_residual(q, f, x, lower, upper):
    """Largest violation of the KKT conditions of the simplex-with-box QP at x."""
    g = q @ x + f
    free = (x > lower + 1e-9) & (x < upper - 1e-9)
    nu = -g[free].mean() if free.any() else -np.median(g)
    r = np.where(free, np.abs(g + nu), 0.0)
    r = np.maximum(r, np.where(x <= lower + 1e-9, -(g + nu), 0.0))
    r = np.maximum(r, np.where(x >= upper - 1e-9, g + nu, 0.0))
    return float(r.max())


@pytest.mark.parametrize("seed", range(40))
def test_matches_kkt_enumeration_on_random_problems(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 7))
    a = rng.standard_normal((m, m + 1))
    q = a @ a.T
    f = 3 * rng.standard_normal(m)
    total = float(rng.uniform(0.5, 2.0))
    upper = np.ones(m) if total <= m else np.full(m, np.inf)
    x = simplex_qp(q, f, total=total, upper=upper)
    assert abs(x.sum() - total) < 1e-12 and (x >= 0).all() and (x <= upper).all()
    assert _value(q, f, x) <= _enumerate(q, f, total, np.zeros(m), upper) + 1e-12 * max(1, abs(_value(q, f, x)))
    assert _kkt_residual(q, f, x, np.zeros(m), upper) < 1e-10


@pytest.mark.parametrize("seed", range(10))
def test_agrees_with_scipy_slsqp(seed):
    rng = np.random.default_rng(100 + seed)
    m = 5
    a = rng.standard_normal((m, m))
    q = a @ a.T + 0.1 * np.eye(m)
    f = rng.standard_normal(m)
    x = simplex_qp(q, f)
    ref = minimize(lambda y: _value(q, f, y), np.full(m, 1 / m), jac=lambda y: q @ y + f, method="SLSQP",
                   bounds=[(0, 1)] * m, constraints=[{"type": "eq", "fun": lambda y: y.sum() - 1}],
                   options={"ftol": 1e-15, "maxiter": 1000})
    assert np.abs(x - ref.x).max() < 1e-6
    assert _value(q, f, x) <= ref.fun + 1e-12


def test_singular_hessian_reaches_the_minimum_value():
    """Three copies of one kernel (rank-deficient M, as ONKC's heart): the minimum value is
    reached, though the minimiser is not unique."""
    rng = np.random.default_rng(7)
    b = rng.standard_normal((5, 2))
    q = b @ b.T
    f = rng.standard_normal(5)
    x = simplex_qp(q, f)
    assert abs(x.sum() - 1) < 1e-12 and (x >= 0).all()
    assert _value(q, f, x) <= _enumerate(q, f, 1.0, np.zeros(5), np.ones(5)) + 1e-12
    assert _kkt_residual(q, f, x, np.zeros(5), np.ones(5)) < 1e-10
    zero = simplex_qp(np.zeros((3, 3)), np.array([1.0, -2.0, 0.5]))  # a linear programme: a vertex
    np.testing.assert_allclose(zero, [0, 1, 0], atol=1e-15)


def test_box_only_and_general_bounds():
    q = np.diag([2.0, 1.0, 4.0])
    f = np.array([-4.0, 1.0, -1.0])
    x = simplex_qp(q, f, total=None, lower=[0, 0, 0], upper=[1, 1, 1])  # separable: clip(-f / q)
    np.testing.assert_allclose(x, [1.0, 0.0, 0.25], atol=1e-15)
    x = simplex_qp(q, f, total=3.0, lower=[0.5, 0.5, 0.5], upper=[2, 2, 2])
    assert abs(x.sum() - 3) < 1e-12 and (x >= 0.5 - 1e-15).all()
    assert _value(q, f, x) <= _enumerate(q, f, 3.0, np.full(3, 0.5), np.full(3, 2.0)) + 1e-12


def test_uniform_solution_and_one_variable():
    np.testing.assert_allclose(simplex_qp(np.eye(4), np.zeros(4)), np.full(4, 0.25), atol=1e-15)
    np.testing.assert_array_equal(simplex_qp([[3.0]], [1.0]), [1.0])


@pytest.mark.parametrize("kwargs, match", [
    ({"hessian": [[1.0, 0], [0, -1]], "linear": [0, 0]}, "not positive semi-definite"),
    ({"hessian": np.eye(3), "linear": [0, 0]}, "shape"),
    ({"hessian": [[np.nan]], "linear": [0]}, "finite"),
    ({"hessian": np.eye(2), "linear": [0, 0], "upper": 0.4}, "infeasible"),
    ({"hessian": np.eye(2), "linear": [0, 0], "lower": [1, 0], "upper": [0, 1]}, "lower > upper"),
    ({"hessian": np.zeros((2, 2)), "linear": [-1, 0], "total": None}, "unbounded"),
])
def test_bad_problems_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simplex_qp(**kwargs)
