"""The gathered step of an iteration: S = (Z + Z^T)/2 on one node -> the factor of K*.

Step 3 of each iteration (docs/algorithm.md section 2; Theorem 2): the row blocks of Z
come together on one worker, the positive eigenpairs of S give ``W_t`` (``K*_t = W_t
W_t^T``), and ``||K*_t - K*_{t-1}||_F`` is formed from the factors. Here: the choice of
the eigen route (a rule on the previous rank and each route's memory), the memory
checks before S is allocated (:mod:`lswmkc_dask.engine._memory`) and the device route
(:mod:`lswmkc_dask.engine.gpu`); the eigensolvers are :mod:`lswmkc_dask.core.eigen`'s.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._threads import blas_threads, limit_blas
from ..core import eigen as _eigen
from ..errors import DeviceFallbackWarning
from . import _memory, gpu


@dataclass(frozen=True)
class StepSummary:
    """What one iteration's gathered step tells the loop (m numbers and scalars).

    Attributes
    ----------
    delta : ndarray of shape (m,)
        ``delta_p = Tr(K_p Z_t^T)`` (Eq. 11); the next weights are ``delta / ||delta||`` (Eq. 12).
    gamma_sq_norm : float
        ``sum_i gamma_i ||Z_t[i]||^2`` (Eq. 10).
    z_fro_sq : float
        ``||Z_t||_F^2``.
    kstar_sq : float
        ``||K*_t||_F^2`` (the sum of the squared positive eigenvalues of S).
    rank : int
        Number of positive eigenvalues of S (the rank of K*_t).
    seconds_eig : float
        Seconds of the eigendecomposition.
    threads : int
        BLAS threads it was given.
    driver : str
        The eigen route that gave the result ("mrrr", "subset", "evd", "lanczos", "cuda").
    kstar_change : float or None
        ``||K*_t - K*_{t-1}||_F`` (NaN at t = 1); None until computed (:func:`kstar_summary`).
    error : str or None
        Why the step could not finish (the memory left); returned, not raised, so that
        Dask does not retry it on every worker.
    device_fallback : str or None
        Why the device could not take this step (it ran on the CPU).
    eig_parts : dict
        Seconds of each part of a dense eigen route and its eigenvectors ("columns"), as
        ``used`` of :func:`lswmkc_dask.core.eigen.psd_factor`; empty for "lanczos" and the device.
    """

    delta: np.ndarray
    gamma_sq_norm: float
    z_fro_sq: float
    kstar_sq: float = math.nan
    rank: int = 0
    seconds_eig: float = math.nan
    threads: int = 0
    driver: str = ""
    kstar_change: float | None = None
    error: str | None = None
    device_fallback: str | None = None
    eig_parts: dict = field(default_factory=dict)


#: "auto" takes "subset" while the previous K* had rank <= SUBSET_MAX_FRACTION of n,
#: "evd" from EVD_MIN_FRACTION (each where its memory fits), "mrrr" between, at the first
#: step and wherever the others would not fit. Measured on 2 cores at n = 2000 and 4000
#: (docs/performance.md#the-crossovers): "mrrr" is the fastest from ~15%; the full
#: divide-and-conquer costs 0.88-1.18 x "mrrr" at 60%; below 15% "subset" and "mrrr" cost
#: the same alone, and "subset" was faster with two fits sharing the cores.
SUBSET_MAX_FRACTION = 0.15


EVD_MIN_FRACTION = 0.6


#: "auto" takes "lanczos" (ARPACK on the sparse S) while the previous rank is <=
#: LANCZOS_MAX_FRACTION of n, for n >= LANCZOS_MIN_N: at n = 2000 it took 0.24 s at rank 4%
#: against 0.68 s ("mrrr"); slower from 6%.
LANCZOS_MAX_FRACTION = 0.05


LANCZOS_MIN_N = 1000


#: ``eig_precision="float32"`` takes the float64 route while the previous rank of K* is
#: above this fraction of n (the float32 route's float64 Rayleigh-Ritz step, ``4 n r^2 +
#: 10 r^3``, eats its gain: docs/performance.md#the-float32-route), and at the first step
#: (K*_1 has 40-47% of n in every fit measured).
FLOAT32_MAX_FRACTION = 0.3


def _dense_s_bytes(n):
    """Memory of the "mrrr" route's dense S until its reduction, with its packing and workspace (bytes)."""
    return 5 * n * n + 4096 * n


def _route_bytes(route, n, r):
    """Memory of an eigen route beyond the sparse Z: S, eigenvectors, workspace (bytes)."""
    if route == "mrrr":  # S's lower half (and the packing), then the packed reflectors and the eigenvectors
        return max(_dense_s_bytes(n), _eigen.mrrr_bytes(n, r))
    if route == "subset":  # SciPy's n x n eigenvector buffer, then the r columns copied
        return 8 * n * (2 * n + r)
    if route == "lanczos":  # ARPACK's 2 k + 1 vectors (k = 1.1 r + 10, once doubled); sparse S at ~2 KiB a row
        return 8 * n * (4 * (int(1.1 * r) + 10) + 2) + 2048 * n
    return 4 * 8 * n * n  # evd: S, all eigenvectors, the divide-and-conquer workspace


def _fits(route, n, r):
    left = _memory.memory_left()
    return left is None or _route_bytes(route, n, r) <= 0.8 * left


def _choose_driver(driver, n, prev_rank):
    """The eigen route of this step: "auto" is a rule on the previous rank and each route's memory
    (not timings, so that the same data gives the same result bit for bit): "mrrr",
    "subset", "evd" or "lanczos".
    """
    driver = _eigen.eigen_spec(driver).driver
    if driver != "auto":
        return driver
    if prev_rank is None:
        return "mrrr"
    r = int(prev_rank)
    if n >= LANCZOS_MIN_N and r <= LANCZOS_MAX_FRACTION * n and _fits("lanczos", n, r):
        return "lanczos"
    if r >= EVD_MIN_FRACTION * n and _fits("evd", n, r):
        return "evd"
    if r <= SUBSET_MAX_FRACTION * n and _fits("subset", n, r):
        return "subset"
    return "mrrr"


def _step_precision(spec, n, prev_rank):
    """``spec.precision``, but "float64" for float32 while the previous rank (n/2 at the first
    step) is above :data:`FLOAT32_MAX_FRACTION` of n.
    """
    rank = prev_rank if prev_rank is not None else n // 2  # the first step: as the rank hint
    if spec.precision == "float32" and rank > FLOAT32_MAX_FRACTION * n:
        return "float64"
    return spec.precision


def kstar_step(block_results, prev_part, driver, n_threads, max_threads=None, with_change=False, prev_factor=None):
    """Gathered step: S = (Z + Z^T)/2 -> positive eigenpairs -> W_t (Theorem 2).

    Returns ``(W_t, part)``: the row blocks' sums, ``||K*_t||_F^2`` and the rank, and with
    ``with_change`` the change from ``prev_factor`` (else :func:`kstar_summary`, a task of
    its own, keeps W_{t-1} out of S's memory). ``prev_part`` carries the rank "auto"
    chooses by. On a device that cannot take this n, a ``DeviceFallbackWarning`` and the
    CPU route (:attr:`StepSummary.device_fallback`).
    """
    z = [r[0] for r in block_results]  # S is built from the blocks: no stacked copy
    part = StepSummary(
        delta=np.sum([r[1][0] for r in block_results], axis=0),
        gamma_sq_norm=float(sum(r[1][1] for r in block_results)),
        z_fro_sq=float(sum(r[1][2] for r in block_results)),
    )
    n = z[0].shape[1]
    spec = _eigen.eigen_spec(driver)
    prev_rank = prev_part.rank if prev_part is not None else None
    xp, why = _device(spec, n, warn=True)
    threads = blas_threads(n_threads, max_threads, n)
    used: dict[str, Any]
    t1 = time.perf_counter()
    if xp is not None:
        (factor, lam), used = gpu.positive_factor(_eigen.dense_lower_s(z), xp), {"driver": "cuda"}
    else:
        part = replace(part, device_fallback=why or None)
        with limit_blas(threads):
            t1 = time.perf_counter()
            factor, lam, used = _host_factor(z, spec, n, prev_rank, threads, prev_factor)
        if factor is None:
            return None, replace(part, error=lam)
    part = replace(part, kstar_sq=float(np.sum(lam**2)), rank=int(lam.size), seconds_eig=time.perf_counter() - t1,
                   threads=threads, driver=used["driver"], eig_parts=dict(used.get("parts", {})))
    if with_change:
        with limit_blas(threads):
            part = replace(part, kstar_change=_kstar_change(part, factor, prev_factor, prev_part))
    return factor, part


def _device(spec, n, warn=False):
    """``(namespace, "")`` where the device takes the gathered step at n, else ``(None, why)``
    (with ``warn``, a ``DeviceFallbackWarning``).
    """
    if spec.device != "cuda":
        return None, ""
    xp = gpu.namespace("cuda")
    why = gpu.device_refusal(n, xp)
    if why and warn:
        warnings.warn(f"the gathered step runs on the CPU: {why}", DeviceFallbackWarning, stacklevel=2)
    return (None, why) if why else (xp, "")


def _host_factor(z, spec, n, prev_rank, threads, prev_factor):
    """``(W_t, eigenvalues, used)`` by the CPU route, its room checked first; ``(None, message, used)``
    where the memory left cannot hold it.
    """
    route = _choose_driver(spec, n, prev_rank)
    rank = prev_rank if prev_rank is not None else n // 2
    headroom = _memory.headroom()
    used = {}

    def memory_left(dense_route):
        """Room for the dense S, checked just before it is built; the bytes left then, less the
        headroom, for psd_factor's check of the eigenvectors.
        """
        used["driver"] = dense_route  # (psd_factor sets the route that gave the result)
        left = _memory.make_room(_dense_s_bytes(n) + headroom)
        return None if left is None else left - headroom

    try:
        precision = _step_precision(spec, n, prev_rank)
        dense32 = precision == "float32" and route != "lanczos"  # (checks its memory as "mrrr" does)
        if route != "mrrr" and not dense32:
            _memory.make_room(_route_bytes(route, n, rank) + headroom)
        factor, lam = _eigen.psd_factor(z, driver=route, memory_left=memory_left, rank_hint=rank, used=used,
                                        precision=precision, threads=threads)
    except _memory.WorkerMemoryError as exc:
        # Returned, not raised (as below); the message with what this step holds.
        which = used.get("driver", route)
        what = (f"the gathered step of the fit (the dense S = (Z + Z^T)/2 at n = {n}, eigen route 'mrrr')"
                if which == "mrrr" else
                f"the gathered step of the fit (S = (Z + Z^T)/2 at n = {n} and the eigenvectors of K*, eigen "
                f"route {which!r}, rank about {rank})")
        holds = (f", {_memory.bytes_text(_memory.held_bytes(*z, prev_factor))} of it the rows of Z"
                 + (" and the previous factor of K*" if prev_factor is not None else ""))
        return None, _memory.short_of_memory(what, exc.need, exc.left, exc.limit, exc.resident, holds), used
    except _eigen.EigenvectorMemoryError as exc:
        # Returned, not raised: Dask would retry a raised error on every worker,
        # recomputing S each time, before the same message reached the caller.
        return None, _memory.with_figures(str(exc), _memory.held_bytes(*z, prev_factor)), used
    used.setdefault("driver", route)
    return factor, lam, used


def kstar_summary(part, factor, prev_factor, prev_part, n_threads, max_threads=None):
    """The iteration's summary: ``part`` and ``||K*_t - K*_{t-1}||_F`` from the factors,
    ``||K*_t||^2 + ||K*_{t-1}||^2 - 2 ||W_t^T W_{t-1}||_F^2``.
    """
    if part.error is not None:
        return part
    if prev_factor is None:  # t = 1: nothing to compare with (no thread count to choose)
        return replace(part, kstar_change=math.nan)
    with limit_blas(blas_threads(n_threads, max_threads, factor.shape[0])):
        return replace(part, kstar_change=_kstar_change(part, factor, prev_factor, prev_part))


def _kstar_change(part, factor, prev_factor, prev_part):
    """``||W_t W_t^T - W_{t-1} W_{t-1}^T||_F`` (NaN without W_{t-1}); see :func:`kstar_summary`."""
    if prev_factor is None:
        return math.nan
    cross = 0.0
    for c0 in range(0, prev_factor.shape[1], 1024):
        cross += float(np.sum(np.square(factor.T @ prev_factor[:, c0 : c0 + 1024])))
    return math.sqrt(max(part.kstar_sq + prev_part.kstar_sq - 2.0 * cross, 0.0))


def factor_from_blocks(block_results, prev_rank, driver, n_threads, max_threads=None):
    """W_t from the checkpointed rows of Z_t (a restart), by :func:`kstar_step`'s rule with the
    rank of W_{t-1}: the undisturbed fit's factor.
    """
    z = [r[0] for r in block_results]
    n = z[0].shape[1]
    spec = _eigen.eigen_spec(driver)
    xp, _ = _device(spec, n)
    if xp is not None:
        return gpu.positive_factor(_eigen.dense_lower_s(z), xp)[0]
    route = _choose_driver(spec, n, prev_rank)
    threads = blas_threads(n_threads, max_threads, n)
    with limit_blas(threads):
        factor, _ = _eigen.psd_factor(z, driver=route, rank_hint=prev_rank,
                                      precision=_step_precision(spec, n, prev_rank), threads=threads)
    return factor
