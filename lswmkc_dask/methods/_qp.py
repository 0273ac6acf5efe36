"""A small exact solver for convex quadratic programmes over a box with one sum constraint.

The kernel-weight steps of MKKM-MR, LKAM and ONKC (and LMKKM's sample-wise weights) are
quadratic programmes in a few variables,

    minimise 0.5 x^T Q x + f^T x   subject to   sum(x) = total,   lower <= x <= upper,

that their authors solve with MATLAB's ``quadprog``. :func:`simplex_qp` solves them with a
primal active-set method (Nocedal & Wright, *Numerical Optimization*, 2nd ed., Springer 2006,
Algorithm 16.3): each step solves the equality-constrained problem on the free variables
exactly (an eigen-decomposition of the reduced Hessian), so the answer is exact to rounding
once the right active set is found, which takes finitely many steps. Positive semi-definite
Hessians (linearly dependent kernels) are handled through directions of zero curvature.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import eigh, null_space

#: relative size below which an eigenvalue of the reduced Hessian counts as zero
_CURVATURE_RTOL = 1e-12
#: relative tolerance of the multiplier signs (optimality) and of convexity
_KKT_RTOL = 1e-12


def _as_bounds(value: Any, m: int, name: str) -> np.ndarray:
    """``value`` broadcast to a float64 vector of length ``m``."""
    out = np.broadcast_to(np.asarray(value, dtype=np.float64), (m,)).copy()
    if np.isnan(out).any():
        raise ValueError(f"{name} has a NaN")
    return out


def _feasible_start(lower: np.ndarray, upper: np.ndarray, total: float | None) -> np.ndarray:
    """The feasible point nearest to the uniform ``total / m`` (or to 0 without the sum)."""
    m = lower.shape[0]
    if total is None:
        return np.clip(np.zeros(m), lower, upper)
    if lower.sum() > total or upper.sum() < total:
        raise ValueError(f"infeasible: the bounds allow sums in [{lower.sum()}, {upper.sum()}], not {total}")
    lo, hi = -1.0, 1.0  # bisection for t with sum(clip(total/m + t)) = total
    base = total / m
    while np.clip(base + lo, lower, upper).sum() > total:
        lo *= 2.0
    while np.clip(base + hi, lower, upper).sum() < total:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.clip(base + mid, lower, upper).sum() < total:
            lo = mid
        else:
            hi = mid
    x = np.clip(base + hi, lower, upper)
    inside = np.flatnonzero((x > lower) & (x < upper))
    j = inside[0] if inside.size else int(np.argmax(upper - lower))
    x[j] += total - x.sum()  # the rounding left by the bisection, on one variable
    return x


def _face_step(q_ff: np.ndarray, g_f: np.ndarray, with_sum: bool, scale: float) -> tuple[np.ndarray, bool]:
    """The step on the free variables: (step, is_newton).

    Newton's step to the minimiser of the quadratic on the face (sum of the step 0 when
    ``with_sum``), or, where the reduced gradient has a part along a direction of zero
    curvature, that descent direction (``is_newton`` False: follow it to a bound).
    """
    k = q_ff.shape[0]
    if k == 0 or (with_sum and k == 1):
        return np.zeros(k), True
    z = null_space(np.ones((1, k))) if with_sum else np.eye(k)
    w, v = eigh(z.T @ q_ff @ z)
    gr = v.T @ (z.T @ g_f)
    flat = np.abs(w) <= _CURVATURE_RTOL * scale
    if flat.any() and np.linalg.norm(gr[flat]) > _KKT_RTOL * scale:
        return -(z @ (v[:, flat] @ gr[flat])), False
    coef = np.where(flat, 0.0, gr / np.where(flat, 1.0, w))
    return -(z @ (v @ coef)), True


def _ratio_test(x: np.ndarray, p: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> tuple[float, int, int]:
    """Longest step along ``p`` inside the box: (alpha, blocking index or -1, -1 lower / +1 upper)."""
    alpha, block, side = np.inf, -1, 0
    for i in np.flatnonzero(p):
        room = (lower[i] - x[i]) / p[i] if p[i] < 0 else (upper[i] - x[i]) / p[i]
        room = max(room, 0.0)
        if room < alpha:
            alpha, block, side = room, int(i), (-1 if p[i] < 0 else 1)
    return alpha, block, side


def _worst_multiplier(g: np.ndarray, state: np.ndarray, with_sum: bool, scale: float) -> int:
    """Index of the bound whose multiplier has the wrong sign (most negative), or -1 at the optimum.

    With the sum constraint its multiplier nu is -mean(g) over the free variables (the
    face's stationarity); a variable at its lower bound needs g_i + nu >= 0, at its upper
    bound g_i + nu <= 0.
    """
    free = state == 0
    nu = -float(g[free].mean()) if with_sum and free.any() else 0.0
    mult = np.where(state == -1, g + nu, np.where(state == 1, -(g + nu), np.inf))
    worst = int(np.argmin(mult))
    return worst if mult[worst] < -_KKT_RTOL * scale else -1


def _check_problem(hessian: Any, linear: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """Validated (Q symmetrised, f, scale), or ValueError."""
    q = np.asarray(hessian, dtype=np.float64)
    f = np.asarray(linear, dtype=np.float64).reshape(-1)
    m = f.shape[0]
    if q.shape != (m, m) or m == 0:
        raise ValueError(f"hessian must have shape ({m}, {m}) to match linear, got {q.shape}")
    if not (np.isfinite(q).all() and np.isfinite(f).all()):
        raise ValueError("hessian and linear must be finite")
    q = 0.5 * (q + q.T)
    scale = max(1.0, float(np.abs(q).max()), float(np.abs(f).max()))
    if np.linalg.eigvalsh(q)[0] < -1e-10 * scale:
        raise ValueError("hessian is not positive semi-definite: the problem is not convex")
    return q, f, scale


def simplex_qp(
    hessian: Any,
    linear: Any,
    *,
    total: float | None = 1.0,
    lower: Any = 0.0,
    upper: Any = np.inf,
    max_iter: int | None = None,
) -> np.ndarray:
    """Minimise a convex quadratic over a box, with the variables summing to ``total``.

    Solves ``min 0.5 x^T Q x + f^T x`` s.t. ``sum(x) = total`` (omitted when ``total`` is
    None) and ``lower <= x <= upper``, by a primal active-set method (Nocedal & Wright,
    *Numerical Optimization*, 2nd ed., Springer 2006, Algorithm 16.3). With the defaults it
    is the probability simplex, the kernel-weight step of MKKM-MR, LKAM and ONKC
    (MATLAB ``quadprog(Q, f, [], [], ones(1, m), 1, zeros(m, 1), ones(m, 1))``: an upper
    bound of 1 is implied by the sum).

    Parameters
    ----------
    hessian : array_like of shape (m, m)
        Q, positive semi-definite (symmetrised as (Q + Q^T) / 2).
    linear : array_like of shape (m,)
        f.
    total : float or None
        Right-hand side of the sum constraint; None for no sum constraint.
    lower, upper : float or array_like of shape (m,)
        Bounds (``upper`` may be ``inf``).
    max_iter : int, optional
        Cap on active-set steps (default ``50 m + 100``).

    Returns
    -------
    ndarray of shape (m,)
        The minimiser: exact to rounding for positive definite Q; for a singular Q one of
        the minimisers (the one reached from the start nearest to ``total / m``).

    Raises
    ------
    ValueError
        Shapes that do not match, a non-finite entry, a Hessian with a negative eigenvalue,
        bounds with ``lower > upper``, bounds that no point with the required sum fits, or
        a problem unbounded below (only possible with an infinite bound).
    RuntimeError
        No optimum within ``max_iter`` steps (cycling on a degenerate vertex).
    """
    q, f, scale = _check_problem(hessian, linear)
    m = f.shape[0]
    lo, hi = _as_bounds(lower, m, "lower"), _as_bounds(upper, m, "upper")
    if (lo > hi).any():
        raise ValueError("lower > upper for some variable")
    with_sum = total is not None
    x = _feasible_start(lo, hi, None if total is None else float(total))
    state = np.where(x <= lo, -1, np.where(x >= hi, 1, 0))  # -1 at lower, +1 at upper, 0 free
    if with_sum and not (state == 0).any():
        state[int(np.argmax(hi - lo))] = 0  # one variable stays free: the sum fixes it
    on_face_minimum = False
    for _ in range(max_iter if max_iter is not None else 50 * m + 100):
        g = q @ x + f
        if on_face_minimum:
            worst = _worst_multiplier(g, state, with_sum, scale)
            if worst < 0:
                return x
            state[worst] = 0
        free = np.flatnonzero(state == 0)
        p_f, newton = _face_step(q[np.ix_(free, free)], g[free], with_sum, scale)
        p = np.zeros(m)
        p[free] = p_f
        alpha, block, side = _ratio_test(x, p, lo, hi)
        if newton and alpha >= 1.0:
            x = x + p
            on_face_minimum = True
            continue
        if block < 0:
            raise ValueError("the problem is unbounded below (a direction of zero curvature without a bound)")
        x = x + alpha * p
        x[block] = lo[block] if side < 0 else hi[block]
        state[block] = side
        on_face_minimum = False
    raise RuntimeError("simplex_qp: no optimum within max_iter active-set steps")
