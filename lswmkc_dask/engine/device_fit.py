"""The whole LSWMKC fit resident on one device, written once against the array API.

:func:`fit_resident` takes the preprocessed kernel stack as an array of any array-API
namespace (CuPy on a GPU; NumPy, or array-api-strict on a non-default device in CI) and
runs the initialisation and every iteration there (docs/algorithm.md sections 1-2), with
:mod:`lswmkc_dask.core.equations`: the loop is :func:`lswmkc_dask.engine.solver.iterate`'s,
with :class:`DeviceRunner` as its runner and the :class:`PrecisionSwitch` of
``precision="mixed"`` as its stop hook. Every copy between host
and device goes through one counted :class:`Link` (nothing of size n x n: docs/algorithm.md
section 5a). The route's rule and entry points: :mod:`lswmkc_dask.engine.device_route`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..core import equations as core
from ..core import polar
from ..errors import Param, ParameterError
from . import gpu
from ._gathered import StepSummary
from .solver import FitResult, InitState, Step, iterate

#: Resident precisions: "float64" (eigh every iteration) or "mixed".
RESIDENT_PRECISIONS = ("float64", "mixed")

#: Namespaces :attr:`lswmkc_dask.records.FitOptions.resident` may name.
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

    def record(self, direction: str, what: str, nbytes: int) -> None:
        """Record a copy made outside :meth:`to_device` / :meth:`to_host` (a streamed block).

        Parameters
        ----------
        direction : {"to_device", "to_host"}
        what : str
        nbytes : int
        """
        self.transfers.log.append((self.transfers.iteration, direction, what, int(nbytes)))

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
    """The namespace and device of a resident fit: "cuda" (CuPy, current device), "numpy",
    or "array-api-strict" (its ``Device("device1")``, which refuses host round trips).

    Returns
    -------
    (xp, device)

    Raises
    ------
    ParameterError
        Unknown ``name``.
    lswmkc_dask.engine.gpu.DeviceUnavailableError
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


def default_block_rows(n_kernels: int, n: int) -> int:
    """Rows per block of the resident pass: all rows while ``(m + 6) b n`` numbers stay
    under 2**28 (about 2 GiB of float64 temporaries).

    Returns
    -------
    int
    """
    return max(1, min(n, 2**28 // ((n_kernels + 6) * n)))


def _blocks(n, block_rows):
    b = max(1, int(block_rows))
    return [(s, min(n, s + b)) for s in range(0, n, b)]


class DeviceRows:
    """The kernel stack resident on its device (``stack="device"``): its row blocks are views.

    Parameters
    ----------
    kernels : array of shape (m, n, n) of an array-API namespace

    Attributes
    ----------
    stack : str
        "device".
    xp, device, shape, dtype
        Of ``kernels``.
    """

    stack = "device"

    def __init__(self, kernels: Any) -> None:
        from array_api_compat import array_namespace

        self.kernels, self.xp = kernels, array_namespace(kernels)
        self.device, self.shape, self.dtype = kernels.device, tuple(kernels.shape), kernels.dtype

    def row_blocks(self, blocks: list[tuple[int, int]], link: Link) -> Any:
        """``(start, stop, rows)`` per block, rows of shape (m, stop - start, n) on the device.

        Returns
        -------
        iterator
        """
        for start, stop in blocks:
            yield start, stop, self.kernels[:, start:stop, :]


def row_source(kernels: Any) -> Any:
    """``kernels`` as a source of row blocks: itself when it has ``row_blocks`` (a stack off the
    device, :mod:`lswmkc_dask.engine.device_route`), else :class:`DeviceRows`.

    Returns
    -------
    object with ``row_blocks``, ``xp``, ``device``, ``shape`` and ``stack``
    """
    return kernels if hasattr(kernels, "row_blocks") else DeviceRows(kernels)


def _init_block(rows, weights0, start, c, xp):
    """Eqs. (25)-(28) for rows ``start:stop`` on the device: ``(gamma, delta)`` (ties by column index)."""
    idx, z, gamma = core.initial_neighbours(core.combine_kernels(rows, weights0, xp=xp), start, c, xp=xp,
                                            full_sort=True)
    return gamma, core.kernel_alignment(rows, (idx, z), xp=xp)


def _initialise(kernels, link, blocks, c, gamma):
    """The :class:`InitState` of Eqs. (25)-(28) on the device, a row block at a time: omega0 and
    gamma's blocks there, gamma and delta(Z0) on the host (Z0 itself is not kept).
    """
    xp = link.xp
    m, n = kernels.shape[0], kernels.shape[1]
    weights0 = link.to_device(np.full(m, math.sqrt(1.0 / m)), "omega0")
    parts = [_init_block(rows, weights0, s, c, xp) for s, _, rows in kernels.row_blocks(blocks, link)]
    gamma_dev = xp.concat([p[0] for p in parts])
    delta = link.to_host(xp.sum(xp.stack([p[1] for p in parts]), axis=0), "delta0")
    if isinstance(gamma, str):
        gamma_host = link.to_host(gamma_dev, "gamma")
    else:
        gamma_host = np.full(n, float(gamma))
        gamma_dev = link.to_device(gamma_host, "gamma")
    return InitState([s for s, _ in blocks], [gamma_dev[s:e] for s, e in blocks], [], gamma_host, delta, weights0)


def _graph_block(rows, start, stop, weights, weights0, factor, gamma, alpha, xp):
    """Rows ``start:stop`` of Z_t (Eqs. 13-16) with delta_p, ``sum gamma_i ||Z_i||^2`` and ``||Z_i||^2``
    (``gamma``: gamma_i of these rows).
    """
    if factor is None or isinstance(factor, _Factor):
        kstar = core.kstar_rows(rows, start, None if factor is None else factor.w, weights0, xp=xp)
    else:
        kstar = factor[start:stop, :]  # K* itself, dense (a float32 iteration of eig_precision="mixed")
    return core.graph_block(rows, start, gamma, weights, kstar, alpha, xp=xp, full_sort=True)


class _Factor:
    """W of ``K* = W W^T`` (n x r), told apart from a dense K* (n x n) of a mixed iteration."""

    def __init__(self, w: Any) -> None:
        self.w = w
        self.shape = w.shape


def _inner(a, b, blocks, xp):
    """``<K*_a, K*_b>_F`` of two K* each held as a :class:`_Factor` or dense, as a 0-d array."""
    if isinstance(a, _Factor) and isinstance(b, _Factor):
        g = xp.matrix_transpose(a.w) @ b.w
        g *= g
        return xp.sum(g)
    if isinstance(a, _Factor) or isinstance(b, _Factor):
        f, k = (a, b) if isinstance(a, _Factor) else (b, a)
        g = k @ f.w
        g *= f.w
        return xp.sum(g)
    return xp.sum(xp.stack([xp.sum(a[s:e, :] * b[s:e, :]) for s, e in blocks]))


def stack_bytes(transfers: Transfers, iteration: int) -> int:
    """Bytes of kernel rows copied to the device during ``iteration`` (one pass of a stack
    streamed from host memory; 0 for a resident stack or one rebuilt from features).

    Returns
    -------
    int
    """
    return sum(b for t, d, what, b in transfers.log if t == iteration and d == "to_device" and what == "kernel rows")


def low_dtype(xp: Any, n: int) -> Any:
    """The working precision of eig_precision="mixed"'s polynomial iterations: float16 on
    CuPy from :data:`lswmkc_dask.engine.gpu.GPU_MIN_N` samples (the GPU's tensor cores,
    accumulated in float32), float32 elsewhere. Below that n a GPU is bound by its
    launches, so tensor cores gain nothing there while float16's rounding (about 1e-3)
    is as large as the stop rule's tolerance.

    Parameters
    ----------
    xp : array-API namespace
    n : int
        Samples.

    Returns
    -------
    dtype of ``xp``
    """
    from array_api_compat import is_cupy_namespace

    return xp.float16 if is_cupy_namespace(xp) and n >= gpu.GPU_MIN_N else xp.float32


def _mixed_step(held, link, check, blocks, tile):
    """K*'s positive part of S (``held``'s one entry) by the low-precision polynomial, dense, in S's
    buffer; ``||K*||^2`` and the rank as 0-d arrays; with ``check``, its relative distance to the
    float64 eigh's K* (one float64 eigh more).
    """
    xp = link.xp
    s = held.pop()
    exact = core.positive_factor(s, xp, lambda r: link.to_host(r, "rank"))[0] if check else None
    kstar, rank = polar.positive_part(s, dtype=low_dtype(xp, s.shape[0]), xp=xp, overwrite=True, tile=tile)
    err = None
    if exact is not None:
        num, den = [], []
        for s0, s1 in blocks:
            rows = exact[s0:s1, :] @ xp.matrix_transpose(exact)
            diff = kstar[s0:s1, :] - rows
            num.append(xp.sum(diff * diff))
            den.append(xp.sum(rows * rows))
        err = xp.sqrt(xp.sum(xp.stack(num)) / xp.sum(xp.stack(den)))
    return kstar, _inner(kstar, kstar, blocks, xp), rank, err


def first_float64(min_iter: int, max_iter: int) -> int:
    """The first float64 iteration of eig_precision="mixed": ``t = min_iter`` (the decision of
    issue 51), at the latest ``max_iter - 1``, so that a fit cut at max_iter still ends with
    two float64 K*s.

    The stop rule at t compares the change of K* at t with the one at t - 1, that is
    ``K*_{t-2}, K*_{t-1}, K*_t``; it is evaluated on float64 K*s only, so a mixed fit stops
    at ``t >= first_float64 + 2`` (or at max_iter).

    Parameters
    ----------
    min_iter, max_iter : int
        The stop rule's bounds (``max_iter >= 3`` for a mixed fit to have a low phase).

    Returns
    -------
    int
        At least 1 (no low-precision iteration when ``min_iter <= 1``).
    """
    return max(1, min(int(min_iter), int(max_iter) - 1))


def stop_rule_pairs(t: int) -> list[list[int]]:
    """The K*s the stop rule compares at iteration t: ``[[t - 2, t - 1], [t - 1, t]]``, the
    pairs of the two changes ``||K*_{t-1} - K*_{t-2}||`` and ``||K*_t - K*_{t-1}||``.

    Returns
    -------
    list of [int, int]
    """
    return [[t - 2, t - 1], [t - 1, t]]


def _positive_factor(held, link, eigen="syevd"):
    """``W = U_+ diag(sqrt(lambda_+))`` of S (``held``'s one entry, released once decomposed) on the
    device, ``sum lambda_+^2`` (0-d) and r; only r comes to the host ("syevd"), or T's diagonals
    and its positive eigenvectors cross ("split": :func:`lswmkc_dask.engine.gpu.split_positive_factor`).
    """
    xp = link.xp
    if eigen == "split":
        w, lam = gpu.split_positive_factor(held.pop(), link)
        return _Factor(w), xp.sum(lam * lam), lam.shape[0]
    w, lam = core.positive_factor(held.pop(), xp, lambda r: link.to_host(r, "rank"), eigh=gpu.eigh_in_place)
    return _Factor(w), xp.sum(lam * lam), lam.shape[0]


class PrecisionSwitch:
    """The precision of each iteration of a resident fit (``precision``, ``check_every`` and
    ``precision_log`` of :func:`fit_resident`; ``low_name`` "float32" or "float16",
    :func:`low_dtype`), and the stop rule's hold on it: the stop hook of
    :func:`lswmkc_dask.engine.solver.iterate`.

    Attributes
    ----------
    first : int
        The first float64 iteration (:func:`first_float64`; 0 for "float64").
    names : list of str
        The precision of each K*_t so far.
    """

    def __init__(self, precision: str, min_iter: int, max_iter: int, low_name: str = "float32",
                 check_every: int = 0, log: list[dict[str, Any]] | None = None) -> None:
        mixed = precision == "mixed" and max_iter >= 3
        self.first = first_float64(min_iter, max_iter) if mixed else 0
        self.max_iter, self.low_name, self.check_every, self.log = int(max_iter), low_name, int(check_every), log
        self.names: list[str] = []

    def note(self, t: int, error: float | None) -> str:
        """Iteration t done (``error``: its projection error, or None): its precision and log entry
        kept; returns the eigen route it records ("resident", "resident float32 polynomial").
        """
        self.names.append("float64" if t >= self.first else self.low_name)
        if self.log is not None:
            self.log.append({"t": t, "precision": self.names[-1], "change_of": [t - 1, t] if t > 1 else None,
                             "projection_error": error})
        return "resident" if t >= self.first else f"resident {self.low_name} polynomial"

    def hold(self, t: int, stop: bool, converged: bool) -> tuple[bool, bool]:
        """The stop rule's verdict at t, held off until it compares two changes between float64
        K*s (``t >= first + 2``) or max_iter is reached.

        Returns
        -------
        (stop, converged) : tuple of bool
        """
        if t < self.first + 2 and t < self.max_iter:
            return False, False
        return stop, converged

    def record(self, t: int) -> dict[str, Any]:
        """``n_iter``, ``first_float64``, and what the stop rule compared at the last iteration t:
        ``stop_pairs`` (:func:`stop_rule_pairs`) and ``stop_precisions``.

        Returns
        -------
        dict
        """
        pairs = stop_rule_pairs(t)
        return {"n_iter": t, "first_float64": max(self.first, 1), "stop_pairs": pairs,
                "stop_precisions": [[self.names[i - 1] if i >= 1 else None for i in pair] for pair in pairs]}


@dataclass
class _Pass:
    """What one pass over the row blocks reads: ``((start, stop), start, gamma rows)`` per block,
    omega_t and omega0 on the device, K*_{t-1} (None, a _Factor or dense) and alpha.
    """

    per_block: list
    weights: Any
    weights0: Any
    factor: Any
    alpha: float


class DeviceRunner:
    """The runner of :func:`lswmkc_dask.engine.solver.iterate` with the kernel stack and every
    iteration on one device; each step runs when submitted (no lookahead: nothing to cancel).

    Per iteration (:meth:`submit_step`): Z_t into one n x n buffer, a row block at a time;
    S = (Z + Z^T)/2 in that buffer; its positive factor (eigh, the split route, or a low
    iteration's polynomial); the summary, m + 5 numbers in one copy to the host. Z_t comes to
    the host on the stop only (:meth:`fetch`).

    Parameters
    ----------
    kernels : row source
        :func:`row_source` of the stack.
    link : Link
        The device; every copy is recorded under the iteration it belongs to.
    blocks : list of (int, int)
        The row blocks of a pass.
    eigen : {"syevd", "split"}
        The float64 eigen step.
    switch : PrecisionSwitch
    """

    lookahead = False

    def __init__(self, kernels: Any, link: Link, blocks: list[tuple[int, int]], eigen: str,
                 switch: PrecisionSwitch) -> None:
        n = kernels.shape[1]
        self.kernels, self.link, self.blocks, self.eigen, self.switch = kernels, link, blocks, eigen, switch
        self.tile = max(1, min(n, math.isqrt(max(e - s for s, e in blocks) * n)))  # tiles of a row block's size

    def submit_step(self, t: int, per_block: list, weights: np.ndarray, prev: Step | None, alpha: float,
                    init: InitState) -> Step:
        """Iteration t after ``prev`` (None: the first), with the kernel weights ``weights`` (m,).

        Returns
        -------
        lswmkc_dask.engine.solver.Step
            ``blocks``: what the pass read; ``factor``: K*_t (a factor, dense in a low
            iteration); ``part`` and ``summary``: its :class:`StepSummary`.
        """
        self.link.transfers.iteration = t
        read = _Pass(per_block, self.link.to_device(weights, "omega"), init.weights0,
                     None if prev is None else prev.factor, float(alpha))
        z, sums = self._map(read)
        te = time.perf_counter()
        held = [polar.symmetrise_in_place(z, self.tile, xp=self.link.xp)]  # S in Z's buffer
        del z
        factor, kstar_sq, rank, extra = self._factor(t, held)
        summary = self._summary(t, sums, factor, kstar_sq, rank, extra, prev, time.perf_counter() - te)
        return Step(read, None, factor, summary, summary)

    def _rows(self, read):
        """``(start, rows of Z_t, delta_p, sum gamma_i ||Z_i||^2, ||Z_i||^2)`` per row block of ``read``."""
        for (s, e, k), (_, _, gamma) in zip(self.kernels.row_blocks(self.blocks, self.link), read.per_block):
            yield s, *_graph_block(k, s, e, read.weights, read.weights0, read.factor, gamma, read.alpha, self.link.xp)

    def _map(self, read):
        """Z_t (Eqs. 13-16) in one n x n buffer, with delta, ``sum gamma_i ||Z_i||^2`` and ``||Z||^2`` (0-d)."""
        xp, n = self.link.xp, self.kernels.shape[1]
        z = xp.empty((n, n), dtype=xp.float64, device=self.kernels.device)
        parts = []
        for s, rows, *sums in self._rows(read):
            z[s : s + rows.shape[0], :] = rows
            parts.append(sums)
        return z, [xp.sum(xp.stack([p[i] for p in parts]), axis=0) for i in range(3)]

    def _factor(self, t, held):
        """``(K*_t, ||K*_t||^2, r, extra)`` from S (``held``'s one entry, released once decomposed);
        in a low iteration r is None, its rank (and projection error) 0-d arrays in ``extra``.
        """
        sw = self.switch
        if t < sw.first:
            check = sw.check_every > 0 and (t - 1) % sw.check_every == 0
            kstar, kstar_sq, rank, err = _mixed_step(held, self.link, check, self.blocks, self.tile)
            return kstar, kstar_sq, None, [rank] + ([] if err is None else [err])
        return (*_positive_factor(held, self.link, self.eigen), [])

    def _summary(self, t, sums, factor, kstar_sq, rank, extra, prev, seconds_eig):
        """The iteration's :class:`StepSummary`, in one copy to the host, with ``||K*_t - K*_{t-1}||_F``."""
        xp, m = self.link.xp, self.kernels.shape[0]
        cross = kstar_sq * 0.0 if prev is None else _inner(factor, prev.factor, self.blocks, xp)
        host = self.link.to_host(xp.concat([sums[0], xp.stack([sums[1], sums[2], kstar_sq, cross, *extra])]),
                                 "summary")
        delta, (g_sq, z_sq, k_sq, cr) = host[:m], host[m : m + 4]
        r = round(float(host[m + 4])) if extra else rank
        change = math.nan if prev is None else math.sqrt(max(k_sq + prev.summary.kstar_sq - 2.0 * cr, 0.0))
        driver = self.switch.note(t, float(host[m + 5]) if len(extra) > 1 else None)
        return StepSummary(delta, float(g_sq), float(z_sq), float(k_sq), int(r), seconds_eig, 0, driver, change)

    def fetch(self, handles: Any) -> Any:
        """A summary as it is; a pass (on the stop only): Z_t as ``[(CSR of shape (n, n), None)]`` on the
        host, recomputed a row block at a time (S took its buffer), O(nnz) recorded after the loop.

        Returns
        -------
        list or StepSummary
        """
        if not isinstance(handles, _Pass):
            return handles
        link, xp, n = self.link, self.link.xp, self.kernels.shape[1]
        link.transfers.iteration += 1
        values, index = [], []
        for s, rows, *_ in self._rows(handles):
            flat = xp.reshape(rows, (-1,))
            (where,) = xp.nonzero(flat)
            values.append(link.to_host(xp.take(flat, where), "Z values"))
            index.append(link.to_host(where, "Z indices") + s * n)
        flat_index = np.concatenate(index)
        out = sp.csr_matrix((np.concatenate(values), (flat_index // n, flat_index % n)), shape=(n, n))
        out.sort_indices()
        return [(out, None)]

    def release(self, *handles: Any) -> None:
        """Drop K*_{t-1} from a pass (freed before the next pass forms Z)."""
        for h in handles:
            if isinstance(h, _Pass):
                h.factor = h.weights = None


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
    precision: str = "float64",
    precision_log: list[dict[str, Any]] | None = None,
    check_every: int = 0,
    record: dict[str, Any] | None = None,
    eigen: str = "syevd",
) -> tuple[FitResult, np.ndarray, sp.csr_matrix]:
    """One LSWMKC fit with the kernel stack and every iteration on its device.

    Parameters
    ----------
    kernels : array of shape (m, n, n), float64 or float32, of any array-API namespace, or a row source
        The preprocessed base kernels (docs/algorithm.md section 0) on the device that
        runs the fit, never copied back; or an object with ``row_blocks`` that gives their
        row blocks there each pass (:func:`row_source`; ``stack="host"`` or ``"features"``:
        :mod:`lswmkc_dask.engine.device_route`).
    alpha : float
        Balance hyper-parameter (Eq. 10), ``0 <= alpha <= 1e300``.
    n_neighbors : int
        c of the initial graph (Eqs. 25-28), ``1 <= c <= n - 2``.
    gamma : "auto" or float
        The learned gamma_i, or one scalar for every sample (docs/algorithm.md 1a).
    max_iter, min_iter : int
        Bounds of the stop rule (:func:`lswmkc_dask.engine.solver.should_stop`).
    tol : float
        Tolerance of the stop rule.
    block_rows : int, optional
        Rows per block of the pass (default: :func:`default_block_rows`).
    callback : callable, optional
        ``callback(t, objective, change, seconds)`` after each iteration.
    transfers : Transfers, optional
        Records every copy between host and device.
    precision : {"float64", "mixed"}
        "float64": K* from ``xp.linalg.eigh`` every iteration (the reference). "mixed":
        while far from the stop rule, K* is the low-precision polynomial positive part of S
        (:func:`lswmkc_dask.core.polar.positive_part`, dense) for t < min_iter, then float64
        eigh (:func:`first_float64`); the stop rule is evaluated on float64 K*s only (from
        ``t = min_iter + 2``), and the fit ends with them (``max_iter >= 3``).
    precision_log : list, optional
        Gets one dict per iteration: ``t``, ``precision`` ("float32", "float16" or
        "float64"), ``change_of`` (``[t - 1, t]``, the K*s the change compared; None at
        t = 1) and ``projection_error`` (``||K~* - K*||_F / ||K*||_F`` against float64
        eigh, or None).
    check_every : int
        With "mixed", the projection error is measured on float32 iterations 1,
        ``1 + check_every``, ... (0: never); each measure costs one float64 eigh more.
    record : dict, optional
        Filled with what ran: ``n_iter``; ``first_float64`` (the first float64 iteration,
        :func:`first_float64`, or 1 for "float64"); ``stop_pairs``, the K*s the stop rule
        compared at the last iteration (:func:`stop_rule_pairs`), and ``stop_precisions``,
        their precisions ("float64" twice each where the rule decided); ``stack`` (the
        source's), ``eigen`` and ``stack_bytes_per_pass`` (the kernel rows copied to the
        device in one pass, :func:`stack_bytes`).
    eigen : {"syevd", "split"}
        The float64 eigen step: the namespace's ``eigh`` (cuSOLVER's syevd on CuPy, S's
        buffer taking the eigenvectors), or the split route
        (:func:`lswmkc_dask.engine.gpu.split_positive_factor`: positive eigenpairs only).

    Returns
    -------
    result : lswmkc_dask.engine.solver.FitResult
        ``factor`` is W (n x r, NumPy, K* = W W^T), ``device_factor`` the same W on the
        device; ``z_blocks`` holds Z (one CSR); ``eig_drivers`` are "resident".
    gamma : ndarray of shape (n,)
        gamma_i used.
    affinity : scipy.sparse.csr_matrix of shape (n, n)
        Z of the last iteration.

    Raises
    ------
    FloatingPointError
        The kernel weights are undefined (every delta_p is 0, Eq. 12).
    """
    kernels = row_source(kernels)
    link = Link(kernels.xp, kernels.device, transfers)
    m, n, _ = kernels.shape
    blocks = _blocks(n, default_block_rows(m, n) if block_rows is None else block_rows)
    init = _initialise(kernels, link, blocks, int(n_neighbors), gamma)
    low_name = "float16" if low_dtype(kernels.xp, n) == getattr(kernels.xp, "float16", None) else "float32"
    switch = PrecisionSwitch(precision, min_iter, max_iter, low_name, check_every, precision_log)
    runner = DeviceRunner(kernels, link, blocks, eigen, switch)
    result = iterate(runner, blocks, init, alpha, max_iter=max_iter, min_iter=min_iter, tol=tol, callback=callback,
                     stop_hook=switch.hold)
    if record is not None:
        record.update(stack=kernels.stack, eigen=eigen, stack_bytes_per_pass=stack_bytes(link.transfers, 1),
                      **switch.record(result.n_iter))
    link.transfers.iteration = result.n_iter + 1
    kstar: Any = result.factor
    result.factor, result.device_factor = np.asfortranarray(link.to_host(kstar.w, "factor")), kstar.w
    return result, init.gamma, result.z_blocks[0]
