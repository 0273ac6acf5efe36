"""K*'s positive part by a GEMM polynomial for the sign of S, on the array API.

Theorem 2 makes ``K* = U max(Lambda, 0) U^T`` of the symmetric ``S = (Z + Z^T)/2``;
equally ``K* = (S + |S|)/2`` with ``|S| = S sign(S)``. :func:`sign_coefficients` writes
a composite odd polynomial for the sign function and :func:`positive_part` applies it
to S with matrix products only (no eigendecomposition), in a chosen precision (float32
on any namespace here; half precision on a GPU's tensor cores alike).

The composite polynomial (the idea of the Polar-Express and Chen-Chow iterations:
each step the best odd polynomial for the interval where the eigenvalues now lie).
S is scaled by ``||S||_inf`` (its largest absolute row sum, at least its spectral
norm), so its eigenvalues x lie in [-1, 1]. Given that the positive ones we care about
lie in ``[l, 1]``, the odd cubic ``p(x) = c (q x - x^3)`` with ``q = 1 + l + l^2``
equioscillates about 1 at ``l``, ``x* = sqrt(q / 3)`` and 1, which makes it the
minimax cubic of the constant 1 on ``[l, 1]``: ``p(1) = p(l) = 1 - E``,
``p(x*) = 1 + E`` with ``c = 2 / (m + M)``, ``m = l + l^2``, ``M = (2q / 3) sqrt(q / 3)``.
Scaled by ``1 / (1 + E)`` it maps ``[l, 1]`` into ``[l', 1]``, ``l' = (1 - E) / (1 + E)``;
the last step is not scaled (error E on both sides of 1). Each step costs two matrix
products (``X^2``, then ``X (c q I - c X^2)``); it is increasing on ``[0, x*]``, so an
eigenvalue below ``l`` keeps its sign and stays below 1 in magnitude.

Error bound (exact arithmetic), for every eigenvalue lambda of S: the computed positive
part has the eigenvalue ``(lambda + lambda s(lambda)) / 2`` with ``|1 - |s|| <= E`` for
``|lambda| >= l ||S||_inf`` and ``0 <= |s| <= 1`` below, so
``||K~ - K*||_2 <= (||S||_inf / 2) max(E, l)``. Rounding adds about
``(2 steps + 1) sqrt(n) eps ||S||_inf`` in the working precision (eps = 6e-8 in float32).
"""

from __future__ import annotations

import math
from typing import Any

from array_api_compat import array_namespace

__all__ = ["DEFAULT_LOWER", "positive_part", "sign_coefficients"]

#: Relative size ``l`` (against ``||S||_inf``) from which eigenvalues get their sign to
#: the target accuracy; smaller ones are damped, never flipped.
DEFAULT_LOWER = 1e-3
#: Largest number of cubic steps (from ``l = 1e-12`` to float64 accuracy takes 35).
MAX_STEPS = 60


def sign_coefficients(lower: float, target: float) -> list[tuple[float, float]]:
    """Coefficients ``(a, b)`` of the composite cubic ``x -> a x + b x^3`` for sign(x).

    Parameters
    ----------
    lower : float
        ``0 < l < 1``: eigenvalues with ``|x| >= l`` (x scaled into [-1, 1]) get their
        sign to within ``target``.
    target : float
        Final error E of the polynomial on ``[l, 1]`` (``|1 - p(x)| <= E``), > 0.

    Returns
    -------
    list of (float, float)
        One pair per step, applied in order.

    Raises
    ------
    ValueError
        ``lower`` not in (0, 1) or ``target`` not > 0.
    """
    if not 0.0 < lower < 1.0 or not target > 0.0:
        raise ValueError(f"sign_coefficients: lower must be in (0, 1) and target > 0, got {lower!r}, {target!r}")
    steps: list[tuple[float, float]] = []
    ell = float(lower)
    while len(steps) < MAX_STEPS:
        q = 1.0 + ell + ell * ell
        big = (2.0 * q / 3.0) * math.sqrt(q / 3.0)
        c = 2.0 / (ell + ell * ell + big)
        err = c * big - 1.0
        if err <= target or len(steps) == MAX_STEPS - 1:
            steps.append((c * q, -c))
            break
        steps.append((c * q / (1.0 + err), -c / (1.0 + err)))
        ell = (1.0 - err) / (1.0 + err)
    return steps


def positive_part(s: Any, *, dtype: Any = None, lower: float = DEFAULT_LOWER, xp: Any = None) -> tuple[Any, Any]:
    """``K* ~ (S + S sign(S)) / 2`` by matrix products in ``dtype`` (see the module docstring).

    Parameters
    ----------
    s : array of shape (n, n), float64
        Symmetric S.
    dtype : dtype of ``xp``, optional
        Working precision of the polynomial (e.g. ``xp.float32``, or ``float16`` for a
        GPU's tensor cores: S is scaled into [-1, 1] first); default that of ``s``.
    lower : float
        ``l`` of :func:`sign_coefficients`; the target E is the working precision's eps.
    xp : array-API namespace, optional
        Default: the namespace of ``s``.

    Returns
    -------
    kstar : array of shape (n, n), dtype of ``s``
        The positive part, exactly symmetric.
    rank : 0-d array
        ``trace((I + sign(S)) / 2)``: the number of positive eigenvalues, up to the
        damped ones below ``l``.
    """
    xp = array_namespace(s) if xp is None else xp
    out_dtype = s.dtype
    work = out_dtype if dtype is None else dtype
    n = s.shape[0]
    scale = xp.max(xp.sum(xp.abs(s), axis=1))
    scale = xp.where(scale > 0, scale, xp.ones_like(scale))
    s_low = xp.astype(s / scale, work)  # scaled into [-1, 1]: in range for half precision
    x = s_low
    eye = xp.eye(n, dtype=work, device=s.device)
    for a, b in sign_coefficients(lower, float(xp.finfo(work).eps)):
        x = x @ (a * eye + b * (x @ x))
    del eye
    x = (x + xp.matrix_transpose(x)) * 0.5
    rank = (n + xp.sum(xp.astype(xp.linalg.diagonal(x), out_dtype))) * 0.5
    abs_s = xp.astype(s_low @ x, out_dtype) * scale
    kstar = (s + (abs_s + xp.matrix_transpose(abs_s)) * 0.5) * 0.5
    return kstar, rank
