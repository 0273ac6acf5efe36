"""The whole LSWMKC fit resident on one device, written once against the array API.

:func:`fit_resident` takes the preprocessed kernel stack as an array of any array-API
namespace (CuPy on a GPU; NumPy, or array-api-strict on a non-default device in CI) and
runs the initialisation and every iteration there (docs/algorithm.md sections 1-2):
combined kernel rows, ``K*_{t-1}`` rows from the factor kept on the device, ``z_hat``,
the simplex projection vectorised over a row block (a sort along the rows, no loop over
rows), delta_p, the objective's terms, ``S = (Z + Z^T)/2`` formed from Z on the device,
its positive eigenpairs (``xp.linalg.eigh``, eigenvalues > 0 kept, as
:func:`lswmkc_dask.gpu.positive_factor`) and the next factor. The stop rule is the
CPU route's (:func:`lswmkc_dask.solver.should_stop`).

What crosses between host and device goes through one :class:`Link`, which counts it
(:class:`Transfers`): per iteration ``m`` kernel weights go to the device and ``m + 5``
numbers (delta, three norms, the rank, the overlap of the factors) come back; at the end the
factor W (n x r) and Z in sparse form (the flat indices and values of its non-zeros,
O(nnz)). Nothing of size n x n crosses during the iterations. The CPU route
(:mod:`lswmkc_dask.solver`, LAPACK) is unchanged; :func:`lswmkc_dask.fit.fit_store`
takes this route when :attr:`lswmkc_dask.fit.FitOptions.resident` names a namespace.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import gpu, steps
from ._threads import blas_threads, limit_blas
from .errors import Param, ParameterError
from .fit import LSWMKCResult
from .postprocess import cluster_factor
from .solver import FitResult, IterationRecord, should_stop

__all__ = [
    "Link",
    "Transfers",
    "fit_resident",
    "fit_store_resident",
    "project_simplex_rows",
    "default_block_rows",
    "fit_array_resident",
    "fit_location_resident",
    "load_stack",
    "resident_bytes",
    "resident_namespace",
    "resident_plan",
    "resident_refusal",
    "shape_refusal",
    "warn_blockwise",
]

#: Namespaces :attr:`lswmkc_dask.fit.FitOptions.resident` may name.
RESIDENT_NAMESPACES = ("cuda", "numpy", "array-api-strict")


@dataclass
class Transfers:
    """Bytes copied between host and device, with the iteration each copy belongs to.

    Attributes
    ----------
    log : list of (int, str, str, int)
        ``(iteration, direction, what, nbytes)``: iteration 0 is the set-up and the
        initialisation, ``n_iter + 1`` the results copied back after the loop;
        direction "to_device" or "to_host".
    iteration : int
        The iteration copies are now recorded under.
    """

    log: list[tuple[int, str, str, int]] = field(default_factory=list)
    iteration: int = 0

    def per_iteration(self, direction: str | None = None) -> dict[int, int]:
        """Bytes per iteration (both directions, or ``direction`` only).

        Returns
        -------
        dict of int to int
        """
        out: dict[int, int] = {}
        for t, d, _, nbytes in self.log:
            if direction is None or d == direction:
                out[t] = out.get(t, 0) + nbytes
        return out

    def largest(self, iterations: range | None = None) -> int:
        """The largest single copy (bytes), over ``iterations`` (default all).

        Returns
        -------
        int
        """
        return max((b for t, _, _, b in self.log if iterations is None or t in iterations), default=0)


class Link:
    """The one door between host (NumPy) and device (``xp`` on ``device``), counted.

    Parameters
    ----------
    xp : array-API namespace
    device : device object of ``xp``
    transfers : Transfers, optional
        Where copies are recorded (a new one by default).
    """

    def __init__(self, xp: Any, device: Any, transfers: Transfers | None = None) -> None:
        self.xp = xp
        self.device = device
        self.transfers = transfers if transfers is not None else Transfers()

    def to_device(self, a: Any, what: str, dtype: Any = None) -> Any:
        """Copy the host array ``a`` to the device (recorded as ``what``).

        Returns
        -------
        array of ``xp`` on ``device``
        """
        a = np.ascontiguousarray(a)
        self.transfers.log.append((self.transfers.iteration, "to_device", what, int(a.nbytes)))
        return self.xp.asarray(a, device=self.device, dtype=dtype)

    def to_host(self, x: Any, what: str) -> np.ndarray:
        """Copy the device array ``x`` to a NumPy array (recorded as ``what``).

        Returns
        -------
        ndarray
        """
        from array_api_compat import is_array_api_strict_namespace, is_cupy_array

        if is_cupy_array(x):
            out = x.get()
        elif is_array_api_strict_namespace(self.xp):
            import array_api_strict

            out = np.asarray(x.to_device(array_api_strict.Device("CPU_DEVICE")))
        else:
            out = np.asarray(x)
        out = np.array(out, copy=True)
        self.transfers.log.append((self.transfers.iteration, "to_host", what, int(out.nbytes)))
        return out


def resident_namespace(name: str) -> tuple[Any, Any]:
    """The namespace and device of a resident fit: "cuda" (CuPy, current device),
    "numpy", or "array-api-strict" (its non-default ``Device("device1")``, which refuses
    host round trips: the CI check of residency).

    Returns
    -------
    (xp, device)

    Raises
    ------
    ParameterError
        Unknown ``name``.
    lswmkc_dask.gpu.DeviceUnavailableError
        "cuda" without CuPy.
    """
    if name == "cuda":
        xp = gpu.namespace("cuda")
        return xp, xp.empty(0).device
    if name == "numpy":
        from array_api_compat import numpy as xnp

        return xnp, "cpu"
    if name == "array-api-strict":
        import array_api_strict

        return array_api_strict, array_api_strict.Device("device1")
    raise ParameterError("{} must be one of {}, got {!r}", Param("resident"), ", ".join(RESIDENT_NAMESPACES), name)


def project_simplex_rows(v: Any, exclude: Any, xp: Any) -> Any:
    """Euclidean projection of each row of ``v`` onto the simplex with one entry forced to 0.

    The vectorised form of :func:`lswmkc_dask.steps.project_rows_simplex` (Theorem 1,
    Eq. 16): each row is sorted in decreasing order, ``rho`` is the number of entries
    with ``u_r - (sum_{s<=r} u_s - 1) / r > 0`` and ``theta = (sum_{s<=rho} u_s - 1) /
    rho``; ``z = max(v - theta, 0)``. The cumulative sums run in the same order as the
    CPU route's, so theta is the same number.

    Parameters
    ----------
    v : array of shape (b, n), float64, of namespace ``xp``
        Rows to project (``z_hat``).
    exclude : array of shape (b,), integer, same device
        Column forced to 0 in each row (the sample itself).
    xp : array-API namespace

    Returns
    -------
    array of shape (b, n)
        Rows on the simplex, ``z[i, exclude[i]] = 0``.
    """
    b, n = v.shape
    dev = v.device
    cols = xp.arange(n, device=dev)
    work = xp.where(cols[None, :] == exclude[:, None], -xp.inf, v)
    u = xp.sort(work, axis=1, descending=True)
    css = xp.cumulative_sum(xp.where(xp.isfinite(u), u, 0.0), axis=1) - 1.0
    ranks = xp.arange(1, n + 1, dtype=xp.float64, device=dev)
    rho = xp.sum(xp.astype(u - css / ranks > 0, xp.int64), axis=1)
    theta = xp.take_along_axis(css, (rho - 1)[:, None], axis=1)[:, 0] / xp.astype(rho, xp.float64)
    return xp.where(work > theta[:, None], work - theta[:, None], 0.0)


def _blocks(n, block_rows):
    b = max(1, int(block_rows))
    return [(s, min(n, s + b)) for s in range(0, n, b)]


def _init_block(k, weights0, start, stop, c, xp):
    """Eqs. (25)-(28) for rows ``start:stop`` on the device, as :func:`lswmkc_dask.steps.init_graph_rows`:
    ``(gamma, delta)``; ties broken by column index (a stable sort), the sample itself first.
    """
    rows = k[:, start:stop, :]
    n = k.shape[2]
    dev = k.device
    e = -xp.tensordot(weights0, rows, axes=1)
    own = xp.arange(start, stop, device=dev)
    e = xp.where(xp.arange(n, device=dev)[None, :] == own[:, None], -xp.inf, e)
    idx = xp.argsort(e, axis=1, stable=True)[:, 1 : c + 2]
    d = xp.take_along_axis(e, idx, axis=1)
    d_last = d[:, c]
    top_sum = xp.sum(d[:, :c], axis=1)
    z = (d_last[:, None] - d[:, :c]) / (c * d_last - top_sum + float(steps.EPS))[:, None]
    gamma = 0.5 * c * d_last - 0.5 * top_sum
    delta = xp.stack([xp.sum(xp.take_along_axis(rows[p, ...], idx[:, :c], axis=1) * z) for p in range(k.shape[0])])
    return gamma, delta


def _graph_block(k, start, stop, weights, weights0, factor, gamma, alpha, xp):
    """Rows ``start:stop`` of Z_t (Eqs. 13-16) with their delta_p, ``sum gamma_i ||Z_i||^2`` and ``||Z_i||^2``."""
    rows = k[:, start:stop, :]
    combined = xp.tensordot(weights, rows, axes=1)
    if factor is None:  # K*_0 = sum_p omega0_p K_p (docs/algorithm.md section 1)
        kstar = xp.tensordot(weights0, rows, axes=1)
    else:
        kstar = factor[start:stop, :] @ xp.matrix_transpose(factor)
    g = gamma[start:stop]
    z_hat = (kstar * (2.0 * alpha) + combined) / (2.0 * (alpha + g))[:, None]
    z = project_simplex_rows(z_hat, xp.arange(start, stop, device=k.device), xp)
    row_sq = xp.sum(z * z, axis=1)
    delta = xp.tensordot(rows, z, axes=([1, 2], [0, 1]))
    return z, delta, xp.sum(g * row_sq), xp.sum(row_sq)


def _positive_factor(z, link):
    """``W = U_+ diag(sqrt(lambda_+))`` of ``S = (Z + Z^T)/2`` on the device (n x r) and ``sum lambda_+^2``
    as a 0-d device array; eigenvalues > 0 kept, as :func:`lswmkc_dask.gpu.positive_factor`. Only the rank r
    (one number) comes to the host, to cut the factor to its r columns.
    """
    xp = link.xp
    s = (z + xp.matrix_transpose(z)) * 0.5
    lam, u = xp.linalg.eigh(s)
    del s
    order = xp.argsort(lam)
    lam = xp.take(lam, order)
    n = lam.shape[0]
    r = int(link.to_host(xp.sum(xp.astype(lam > 0, xp.int64)), "rank"))
    lam = lam[n - r :]
    w = xp.take(u, order[n - r :], axis=1) * xp.sqrt(lam)[None, :]
    return w, xp.sum(lam * lam), r


def _sparse_z(z, link):
    """Z as a CSR matrix on the host from its non-zeros on the device: O(nnz) crosses."""
    xp = link.xp
    n = z.shape[0]
    flat = xp.reshape(z, (-1,))
    (where,) = xp.nonzero(flat)
    values = link.to_host(xp.take(flat, where), "Z values")
    index = link.to_host(where, "Z indices")
    out = sp.csr_matrix((values, (index // n, index % n)), shape=(n, n))
    out.sort_indices()
    return out


def fit_resident(
    kernels: Any,
    alpha: float,
    *,
    n_neighbors: int = 5,
    gamma: str | float = "auto",
    max_iter: int = 100,
    min_iter: int = 20,
    tol: float = 1e-3,
    block_rows: int | None = None,
    callback: Callable[..., None] | None = None,
    transfers: Transfers | None = None,
) -> tuple[FitResult, np.ndarray, sp.csr_matrix]:
    """One LSWMKC fit with the kernel stack and every iteration on its device.

    Parameters
    ----------
    kernels : array of shape (m, n, n), float64, of any array-API namespace
        The preprocessed base kernels (docs/algorithm.md section 0) on the device that
        runs the fit (e.g. a CuPy array); read there, never copied back.
    alpha : float
        Balance hyper-parameter (Eq. 10), ``0 <= alpha <= 1e300``.
    n_neighbors : int
        c of the initial graph (Eqs. 25-28), ``1 <= c <= n - 2``.
    gamma : "auto" or float
        The learned gamma_i, or one scalar for every sample (docs/algorithm.md 1a).
    max_iter, min_iter : int
        Bounds of the stop rule (:func:`lswmkc_dask.solver.should_stop`).
    tol : float
        Tolerance of the stop rule.
    block_rows : int, optional
        Rows per block of the pass (default: all rows while ``(m + 6) b n`` numbers stay
        under 2**28, about 2 GiB).
    callback : callable, optional
        ``callback(t, objective, change, seconds)`` after each iteration.
    transfers : Transfers, optional
        Records every copy between host and device.

    Returns
    -------
    result : lswmkc_dask.solver.FitResult
        ``factor`` is W (n x r, NumPy, K* = W W^T); ``z_blocks`` holds Z (one CSR);
        ``eig_drivers`` are "resident".
    gamma : ndarray of shape (n,)
        gamma_i used.
    affinity : scipy.sparse.csr_matrix of shape (n, n)
        Z of the last iteration.

    Raises
    ------
    FloatingPointError
        The kernel weights are undefined (every delta_p is 0, Eq. 12).
    """
    from array_api_compat import array_namespace

    xp = array_namespace(kernels)
    link = Link(xp, kernels.device, transfers)
    m, n, _ = kernels.shape
    c = int(n_neighbors)
    if block_rows is None:
        block_rows = max(1, min(n, 2**28 // ((m + 6) * n)))
    blocks = _blocks(n, block_rows)
    t0 = time.perf_counter()
    weights0_host = np.full(m, math.sqrt(1.0 / m))
    weights0 = link.to_device(weights0_host, "omega0")
    parts = [_init_block(kernels, weights0, s, e, c, xp) for s, e in blocks]
    gamma_dev = xp.concat([p[0] for p in parts])
    delta = link.to_host(xp.sum(xp.stack([p[1] for p in parts]), axis=0), "delta0")
    if isinstance(gamma, str):
        gamma_host = link.to_host(gamma_dev, "gamma")
    else:
        gamma_host = np.full(n, float(gamma))
        gamma_dev = link.to_device(gamma_host, "gamma")
    history: list[IterationRecord] = []
    factor: Any = None
    z: Any = None
    prev_sq = math.nan
    t = 0
    while True:
        t += 1
        link.transfers.iteration = t
        z = None  # Z_{t-1} is not needed beside the rows of Z_t
        ti = time.perf_counter()
        weights = steps.kernel_weights(delta)
        w_dev = link.to_device(weights, "omega")
        out = [_graph_block(kernels, s, e, w_dev, weights0, factor, gamma_dev, float(alpha), xp) for s, e in blocks]
        z = xp.concat([o[0] for o in out], axis=0)
        sums = [xp.sum(xp.stack([o[i] for o in out]), axis=0) for i in (1, 2, 3)]  # delta, sum g ||z||^2, ||Z||^2
        del out  # the row blocks of Z: S and the eigenvectors need the room
        te = time.perf_counter()
        new_factor, kstar_sq, r = _positive_factor(z, link)
        seconds_eig = time.perf_counter() - te
        cross = xp.sum(xp.square(xp.matrix_transpose(new_factor) @ factor)) if factor is not None else kstar_sq * 0.0
        summary = link.to_host(xp.concat([sums[0], xp.stack([sums[1], sums[2], kstar_sq, cross])]), "summary")
        delta, (g_sq, z_sq, k_sq, cr) = summary[:m], summary[m:]
        change = math.nan if factor is None else math.sqrt(max(k_sq + prev_sq - 2.0 * cr, 0.0))
        factor, prev_sq = new_factor, float(k_sq)
        obj = steps.objective(weights, delta, float(g_sq), float(z_sq), float(k_sq), float(alpha))
        stop, converged = should_stop(t, [h.kstar_change for h in history] + [change], math.sqrt(k_sq), tol,
                                      min_iter, max_iter)
        history.append(IterationRecord(t, obj, change, int(r), time.perf_counter() - ti, seconds_eig, 0, "resident"))
        if callback is not None:
            callback(t, obj, change, history[-1].seconds)
        if stop:
            break
    link.transfers.iteration = t + 1
    w_host = np.asfortranarray(link.to_host(factor, "factor"))
    affinity = _sparse_z(z, link)
    result = FitResult(alpha=float(alpha), weights=weights, n_iter=t, history=history, kstar_norm=math.sqrt(prev_sq),
                       converged=converged, seconds=time.perf_counter() - t0, z_blocks=[affinity], factor=w_host)
    return result, gamma_host, affinity


def resident_bytes(n_kernels: int, n: int, block_rows: int, itemsize: int = 8) -> int:
    """Device memory of a resident fit (bytes).

    Parameters
    ----------
    n_kernels, n : int
        m and n.
    block_rows : int
        Rows per block of the pass.
    itemsize : int, default 8
        Bytes per entry of the stack (the store's dtype: 8 for float64, 4 for float32).

    Returns
    -------
    int
        The stack (``m n^2`` entries of ``itemsize``), Z, S, the solver's copy of S with
        its eigenvectors and workspace (about ``5 n^2`` float64) and a row block's
        temporaries (``(m + 6) b n`` float64).
    """
    return itemsize * n_kernels * n * n + 8 * (5 * n * n + (n_kernels + 6) * block_rows * n)


def default_block_rows(n_kernels: int, n: int) -> int:
    """Rows per block of the resident pass: all rows while ``(m + 6) b n`` numbers stay
    under 2**28 (about 2 GiB of float64 temporaries).
    """
    return max(1, min(n, 2**28 // ((n_kernels + 6) * n)))


def resident_refusal(store: Any, xp: Any, *, snapshots: bool = False, precision: str = "float64") -> str:
    """Why the resident route cannot take this fit on ``xp``'s device ("" when it can).

    Parameters
    ----------
    store : lswmkc_dask.io.KernelStore
        The kernel stack, shape (m, n, n).
    xp : array-API namespace
        Of the device (:func:`lswmkc_dask.gpu.namespace`).
    snapshots : bool
        Snapshots of Z_t and K*_t are asked for (kept by the blockwise route only).
    precision : {"float64", "float32"}
        ``eig_precision``; the resident route computes S's eigenpairs in float64.

    Returns
    -------
    str
        The reason, with the figures for memory (needed against free device memory,
        :func:`resident_bytes` against :func:`lswmkc_dask.gpu.device_info`) and for
        cuSOLVER's size limit of CUDA runtimes before 13
        (:func:`lswmkc_dask.gpu.solver_max_n`); "" when nothing refuses.
    """
    if snapshots:
        return "snapshot_iterations are kept by the blockwise route only"
    if precision != "float64":
        return f"eig_precision={precision!r} runs on the blockwise route (the resident route is float64)"
    return shape_refusal(store.n_kernels, store.n_samples, store.itemsize, xp)


def shape_refusal(m: int, n: int, itemsize: int, xp: Any) -> str:
    """As :func:`resident_refusal`, for a stack of ``m`` kernels at ``n`` samples with
    ``itemsize`` bytes per entry ("" when the device takes it).

    Returns
    -------
    str
    """
    from dask.utils import format_bytes

    runtime, free, total = gpu.device_info(xp)
    limit = gpu.solver_max_n(runtime)
    if limit is not None and n > limit:
        return gpu.device_refusal(n, xp)
    need = resident_bytes(m, n, default_block_rows(m, n), itemsize)
    if free is not None and need > free:
        of = f" of {format_bytes(int(total))}" if total else ""
        return (f"the kernel stack ({m} kernels at n = {n}) with Z, S and its eigenvectors needs "
                f"{format_bytes(need)} of GPU memory, {format_bytes(int(free))}{of} are free")
    return ""


def resident_plan(store: Any, device: str, *, snapshots: bool = False, precision: str = "float64") -> tuple[bool, str]:
    """Whether a fit (or a sweep) on this machine runs wholly on its GPU.

    The resident route is taken where the gathered step goes to the GPU
    (``device == "cuda"``, :func:`lswmkc_dask.gpu.resolve_device`), nothing asked for
    needs the blockwise route (snapshots, ``eig_precision="float32"``) and the device
    can hold the stack with the work arrays (:func:`resident_refusal`).

    Parameters
    ----------
    store : lswmkc_dask.io.KernelStore
        Shape (m, n, n).
    device : {"cpu", "cuda"}
        The resolved ``eig_device``.
    snapshots : bool
        Snapshots asked for.
    precision : {"float64", "float32"}
        ``eig_precision``.

    Returns
    -------
    resident : bool
    why_not : str
        Where the device was asked for but cannot hold the stack: the figures (for a
        :class:`lswmkc_dask.gpu.DeviceFallbackWarning`); "" otherwise.
    """
    if device != "cuda" or snapshots or precision != "float64":
        return False, ""
    xp = gpu.namespace("cuda")
    limit = gpu.solver_max_n(gpu.device_info(xp)[0])
    if limit is not None and store.n_samples > limit:  # the eigen step's own fallback says why
        return False, ""
    why = resident_refusal(store, xp)
    return (not why), why


def warn_blockwise(why: str) -> None:
    """Warn that the row blocks run on the host because the stack does not fit the GPU
    (:class:`lswmkc_dask.gpu.DeviceFallbackWarning`; the eigen step stays on the GPU
    where it fits).
    """
    import warnings

    warnings.warn(f"the whole iteration cannot stay on the GPU: {why}; the row blocks run on the CPU, the eigen "
                  "step on the GPU", gpu.DeviceFallbackWarning, stacklevel=4)


def load_stack(store: Any, link: Link) -> Any:
    """The kernel stack of ``store`` on ``link``'s device, copied one stored row block at a time.

    The host holds one block of rows (``m x b x n``) at a time, never the whole stack.

    Parameters
    ----------
    store : lswmkc_dask.io.KernelStore
        Shape (m, n, n).
    link : Link
        The device; each block's copy is recorded as "kernels".

    Returns
    -------
    array of shape (m, n, n) on the device, in the store's dtype (float64 or float32)

    Raises
    ------
    KernelInputError
        A damaged chunk (the store's integrity checks, as every read).
    """
    xp = link.xp
    m, n = store.n_kernels, store.n_samples
    dtype = xp.float32 if store.itemsize == 4 else xp.float64
    stack = xp.empty((m, n, n), dtype=dtype, device=link.device)
    for start, stop in store.blocks():
        stack[:, start:stop, :] = link.to_device(store.read_rows(start, stop), "kernels", dtype=dtype)
    return stack


def fit_store_resident(store: Any, options: Any, callback: Callable[..., None] | None = None,
                       kernels: Any = None, check_memory: bool = True) -> Any:
    """A whole fit of a kernel store with the stack resident on ``options.resident``'s device.

    The stack goes to the device once, one stored row block at a time
    (:func:`load_stack`; or ``kernels``, already there: a sweep loads it once for all its
    grid points), and :func:`fit_resident` runs there; labels and embedding come from the
    factor W on the host (:func:`lswmkc_dask.postprocess.cluster_factor`, as the CPU
    route).

    Parameters
    ----------
    store : lswmkc_dask.io.KernelStore
        Preprocessed base kernels, shape (m, n, n).
    options : lswmkc_dask.fit.FitOptions
        ``resident`` names the namespace (:data:`RESIDENT_NAMESPACES`); ``eig_driver``,
        ``eig_threads`` (beyond k-means' embedding) and ``snapshot_iterations`` do not apply.
    callback : callable, optional
        As in :func:`fit_resident`.
    kernels : array of shape (m, n, n), optional
        The stack already on the device (from :func:`load_stack`).
    check_memory : bool, default True
        Refuse up front when the device's free memory cannot hold the fit.

    Returns
    -------
    lswmkc_dask.fit.LSWMKCResult
        ``eig_drivers`` are "resident"; ``execution`` names the namespace and device;
        ``stage_seconds["start"]`` the copy of the stack (0 for ``kernels`` given).

    Raises
    ------
    ParameterError
        Unknown ``resident``, or ``snapshot_iterations`` asked for.
    MemoryError
        (CuPy) the stack and the work arrays do not fit the free device memory (the
        message gives needed and free).
    """
    if options.snapshot_iterations:
        raise ParameterError("{} are not kept by a resident fit ({}): fit without it to keep snapshots",
                             Param("snapshot_iterations"), Param("resident", options.resident))
    xp, device = resident_namespace(options.resident)
    if kernels is None and check_memory:
        why = resident_refusal(store, xp)
        if why:
            raise MemoryError(f"{why}: fit with the row blocks on the host (the eigen step alone on the device)")
    t0 = time.perf_counter()
    transfers = Transfers()
    if kernels is None:
        kernels = load_stack(store, Link(xp, device, transfers))
    return _fit_on_device(kernels, options, device, transfers, callback, time.perf_counter() - t0)


def fit_array_resident(kernels: np.ndarray, options: Any, callback: Callable[..., None] | None = None) -> Any:
    """A whole fit of a kernel stack held in host memory, on ``options.resident``'s device.

    What a grid point of a sweep in task mode runs on a GPU worker: the stack (a task
    argument, one copy per worker) goes to the device once, then as
    :func:`fit_store_resident`.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n), float64 or float32
        Preprocessed base kernels.
    options : lswmkc_dask.fit.FitOptions
        With ``resident`` set (no snapshots).
    callback : callable, optional

    Returns
    -------
    lswmkc_dask.fit.LSWMKCResult

    Raises
    ------
    MemoryError
        The device's free memory cannot hold the stack and the work arrays.
    """
    xp, device = resident_namespace(options.resident)
    m, n, _ = kernels.shape
    why = shape_refusal(m, n, kernels.dtype.itemsize, xp)
    if why:
        raise MemoryError(f"{why}: fit with the row blocks on the host (the eigen step alone on the device)")
    t0 = time.perf_counter()
    transfers = Transfers()
    dtype = xp.float32 if kernels.dtype == np.float32 else xp.float64
    stack = Link(xp, device, transfers).to_device(kernels, "kernels", dtype=dtype)
    return _fit_on_device(stack, options, device, transfers, callback, time.perf_counter() - t0)


def fit_location_resident(location: Any, options: Any) -> Any:
    """A resident fit of the kernel store at ``location``, run where this is called.

    The task a fit on a Dask cluster sends to a GPU worker (``resources={"GPU": 1}``):
    the worker opens the store, reads it onto its device one row block at a time and
    fits there; only the result (labels, W of ``n x r``, Z in sparse form) goes back.

    Parameters
    ----------
    location : str or zarr store
        A store the worker can read (:func:`lswmkc_dask.io.open_store`).
    options : lswmkc_dask.fit.FitOptions
        With ``resident`` set.

    Returns
    -------
    lswmkc_dask.fit.LSWMKCResult
        ``execution`` names the worker's device.

    Raises
    ------
    MemoryError
        The worker's device cannot hold the stack (needed against free, in the message).
    KernelInputError
        A damaged store.
    """
    from .io import open_store

    store = open_store(location)
    result = fit_store_resident(store, options)
    result.kernel_names = store.kernel_names
    return result


def _fit_on_device(kernels, options, device, transfers, callback, load_seconds):
    """:func:`fit_resident` on a stack already on the device, then k-means on the host."""
    m, n, _ = kernels.shape
    block_rows = default_block_rows(m, n)
    t1 = time.perf_counter()
    # Host BLAS threads as the in-process CPU route (what NumPy and array-api-strict compute with).
    with limit_blas(blas_threads(options.eig_threads, None, n)):
        result, gamma, affinity = fit_resident(
            kernels, float(options.alpha), n_neighbors=options.n_neighbors, gamma=options.gamma,
            max_iter=options.max_iter, min_iter=options.min_iter, tol=options.tol, block_rows=block_rows,
            callback=callback, transfers=transfers,
        )
    del kernels
    t2 = time.perf_counter()
    factor = np.asarray(result.factor)
    labels, embedding = cluster_factor(factor, options.n_clusters, options.n_init, options.random_state,
                                       options.eig_threads)
    stages = {"start": load_seconds, "iterations": t2 - t1, "cluster": time.perf_counter() - t2, "gather": 0.0}
    return LSWMKCResult(
        labels=labels, embedding=embedding, kstar_factor=factor, affinity=affinity,
        kernel_weights=np.asarray(result.weights), gamma=gamma, objective=np.asarray(result.objective),
        kstar_change=np.asarray(result.kstar_change), n_iter=int(result.n_iter), converged=bool(result.converged),
        fit_seconds=float(result.seconds), iteration_seconds=np.asarray(result.iteration_seconds),
        eig_seconds=np.asarray(result.eig_seconds), eig_threads=np.asarray(result.eig_threads, dtype=np.int64),
        eig_drivers=np.asarray(result.eig_drivers, dtype=object), eig_parts=[{} for _ in result.history],
        kstar_rank=np.asarray(result.rank), n_restarts=0, n_clusters=int(options.n_clusters),
        execution=f"resident on {options.resident} ({device})", stage_seconds=stages,
        device_transfers=transfer_record(transfers, int(result.n_iter)),
    )


def transfer_record(transfers: Transfers, n_iter: int) -> dict[str, int]:
    """What crossed between host and device in one resident fit (bytes).

    Returns
    -------
    dict
        ``to_device`` and ``to_host`` (whole fit, the stack's copy included when this fit
        made it), ``largest_per_iteration`` (the largest single copy during iterations
        1..n_iter: a few numbers, never of size n x n).
    """
    return {
        "to_device": sum(transfers.per_iteration("to_device").values()),
        "to_host": sum(transfers.per_iteration("to_host").values()),
        "largest_per_iteration": transfers.largest(range(1, n_iter + 1)),
    }
