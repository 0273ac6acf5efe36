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


def _ranges(n: int, size: int) -> list[tuple[int, int]]:
    b = max(1, int(size))
    return [(s, min(n, s + b)) for s in range(0, n, b)]


def symmetrise_in_place(a: Any, tile: int | None = None, *, xp: Any = None) -> Any:
    """``(A + A^T) / 2`` written into A's own buffer, one pair of square tiles at a time.

    The same numbers as ``(a + a^T) * 0.5`` (each entry ``(a_ij + a_ji) * 0.5``, so the
    result is exactly symmetric) without an n x n temporary: the work arrays are two
    tiles of ``tile x tile``.

    Parameters
    ----------
    a : array of shape (n, n)
        Overwritten.
    tile : int, optional
        Rows and columns per tile (default n: one tile, two n x n temporaries).
    xp : array-API namespace, optional
        Default: the namespace of ``a``.

    Returns
    -------
    array
        ``a`` itself.
    """
    xp = array_namespace(a) if xp is None else xp
    edges = _ranges(a.shape[0], tile or a.shape[0])
    for i, (r0, r1) in enumerate(edges):
        for c0, c1 in edges[i:]:
            part = (a[r0:r1, c0:c1] + xp.matrix_transpose(a[c0:c1, r0:r1])) * 0.5
            a[r0:r1, c0:c1] = part
            a[c0:c1, r0:r1] = xp.matrix_transpose(part)
    return a


def _scaled_low(s, scale, work, rows, xp):
    """``S / scale`` in the working precision, filled one row block at a time."""
    n = s.shape[0]
    out = xp.empty((n, n), dtype=work, device=s.device)
    for r0, r1 in rows:
        out[r0:r1, :] = xp.astype(s[r0:r1, :] / scale, work)
    return out


def _add_diagonal(y, a, tile, xp):
    """``y += a I`` on the diagonal tiles only (an identity of ``tile x tile``)."""
    n = y.shape[0]
    eye = xp.eye(min(n, tile), dtype=y.dtype, device=y.device)
    for r0, r1 in _ranges(n, tile):
        y[r0:r1, r0:r1] += a * eye[: r1 - r0, : r1 - r0]


def positive_part(s: Any, *, dtype: Any = None, lower: float = DEFAULT_LOWER, xp: Any = None,
                  overwrite: bool = False, tile: int | None = None) -> tuple[Any, Any]:
    """``K* ~ (S + S sign(S)) / 2`` by matrix products in ``dtype`` (see the module docstring).

    Parameters
    ----------
    s : array of shape (n, n), float64
        Exactly symmetric S.
    dtype : dtype of ``xp``, optional
        Working precision of the polynomial (e.g. ``xp.float32``, or ``float16`` for a
        GPU's tensor cores: S is scaled into [-1, 1] first); default that of ``s``.
    lower : float
        ``l`` of :func:`sign_coefficients`; the target E is the working precision's eps.
    xp : array-API namespace, optional
        Default: the namespace of ``s``.
    overwrite : bool
        Write K* into S's buffer (returned as ``kstar``): no n x n array of ``s``'s dtype
        beside S.
    tile : int, optional
        Side of the square tiles of the element-wise steps, whose row blocks hold about
        as many entries (default n: one tile). Memory beside S (and K* unless
        ``overwrite``): three n x n arrays of ``dtype`` (the iterate x, ``b x^2 + a I``
        and their product; S in ``dtype`` takes the place of one of them at the start
        and the end) and a few temporaries of ``tile^2`` entries.

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
    tile = n if tile is None else max(1, min(n, int(tile)))
    rows = _ranges(n, max(1, tile * tile // n))  # row blocks of about tile^2 entries
    scale = xp.max(xp.stack([xp.max(xp.sum(xp.abs(s[r0:r1, :]), axis=1)) for r0, r1 in rows]))
    scale = xp.where(scale > 0, scale, xp.ones_like(scale))
    x = _scaled_low(s, scale, work, rows, xp)  # scaled into [-1, 1]: in range for half precision
    for a, b in sign_coefficients(lower, float(xp.finfo(work).eps)):
        y = x @ x
        y *= b
        _add_diagonal(y, a, tile, xp)
        x = x @ y  # x (a I + b x^2)
        del y
    x = symmetrise_in_place(x, tile, xp=xp)
    rank = (n + xp.sum(xp.astype(xp.linalg.diagonal(x), out_dtype))) * 0.5
    abs_low = _scaled_low(s, scale, work, rows, xp) @ x  # |S| / scale = S sign(S) / scale
    del x
    out = s if overwrite else xp.empty_like(s)
    edges = _ranges(n, tile)
    for i, (r0, r1) in enumerate(edges):
        for c0, c1 in edges[i:]:
            upper = xp.astype(abs_low[r0:r1, c0:c1], out_dtype) * scale
            lower_t = xp.matrix_transpose(xp.astype(abs_low[c0:c1, r0:r1], out_dtype) * scale)
            k = (s[r0:r1, c0:c1] + (upper + lower_t) * 0.5) * 0.5
            out[r0:r1, c0:c1] = k
            out[c0:c1, r0:r1] = xp.matrix_transpose(k)
    return out, rank
