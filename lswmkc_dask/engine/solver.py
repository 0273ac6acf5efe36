"""The LSWMKC alternating loop, mapped over row blocks, written once against a runner
(:mod:`lswmkc_dask.engine.runners`: Dask tasks on the workers, or this process).

Per iteration t (docs/algorithm.md sections 2 and 5): ``omega_t`` (Eq. 12) on the caller;
ONE pass over the kernel row blocks (:func:`_graph_block`); the gathered step
(:mod:`lswmkc_dask.engine._gathered`); the objective (Eq. 10) and the stop rule
(:func:`should_stop`). Z blocks and W stay on the workers as futures.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..core import eigen as _eigen
from ..core import equations as core
from ..errors import KernelInputError, Param, with_message
from ._gathered import StepSummary, factor_from_blocks, kstar_step, kstar_summary
from .runners import lost_errors, read_rows, stack_rows


# ----------------------------------------------------------------------------- tasks
def _init_block(kernels, start, weights0, n_neighbors):
    k = read_rows(kernels)
    z, gamma = core.init_graph_rows(core.combine_kernels(k, weights0), start, n_neighbors)
    return z, gamma, core.kernel_alignment(k, z)


def _weights(source):
    """The kernel weights omega from an array, or from the previous gathered step's summary (Eq. 12)."""
    return core.kernel_weights(source.delta) if isinstance(source, StepSummary) else source


def _graph_block(kernels, start, gamma, weights, kstar_factor, alpha, weights0):
    k = read_rows(kernels)
    kstar = core.kstar_rows(k, start, kstar_factor, weights0)
    z, delta, gamma_sq, z_sq = core.graph_block(k, start, gamma, _weights(weights), kstar, alpha, sparse=True)
    return z, (delta, gamma_sq, z_sq)


# ------------------------------------------------------------------------------ state
@dataclass
class InitState:
    """The alpha-free initialisation (docs/algorithm.md section 1), shared by a sweep.

    Attributes
    ----------
    starts : list of int
        First row of each block.
    gamma_blocks : list
        Handles of gamma per block.
    z_blocks : list
        Handles of the rows of Z0 per block (sparse).
    gamma : ndarray of shape (n,)
    delta : ndarray of shape (m,)
        ``Tr(K_p Z0^T)``.
    weights0 : ndarray of shape (m,)
        ``sqrt(1/m)``.
    """

    starts: list
    gamma_blocks: list
    z_blocks: list
    gamma: np.ndarray
    delta: np.ndarray
    weights0: np.ndarray


@dataclass(frozen=True)
class IterationRecord:
    """One iteration of the loop, as the caller saw it.

    Attributes
    ----------
    t : int
        Iteration number (1-based).
    objective : float
        Eq. (10) after the iteration.
    kstar_change : float
        ``||K*_t - K*_{t-1}||_F`` (NaN at t = 1, which the stop rule never reads).
    rank : int
        Number of positive eigenvalues of S (the rank of K*_t).
    seconds : float
        Wall seconds of the iteration, seen from the caller.
    eig_seconds : float
        Seconds of the eigendecomposition inside the gathered step.
    eig_threads : int
        BLAS threads it was given.
    eig_driver : str
        The eigen route it took ("mrrr", "subset", "evd", "lanczos" or "cuda").
    eig_parts : dict
        Seconds of each part of the eigen route and the eigenvectors it computed
        ("columns"); empty where the route does not record them.
    """

    t: int
    objective: float
    kstar_change: float
    rank: int
    seconds: float
    eig_seconds: float
    eig_threads: int
    eig_driver: str
    eig_parts: dict = field(default_factory=dict)


def _column(name, doc):
    """A read-only property: the ``name`` field of every :class:`IterationRecord` of ``history``."""
    return property(lambda self: [getattr(r, name) for r in self.history], doc=doc)


@dataclass
class FitResult:
    """What :func:`iterate` returns.

    Attributes
    ----------
    alpha : float
    weights : ndarray of shape (m,)
        Kernel weights of the last iteration.
    n_iter : int
    history : list of IterationRecord
        One record per iteration; ``objective``, ``kstar_change``, ``rank``,
        ``iteration_seconds``, ``eig_seconds``, ``eig_threads`` and ``eig_drivers`` are
        its columns.
    kstar_norm : float
        ``||K*||_F`` at the end.
    converged : bool
        Stopped by the tolerance rather than ``max_iter``.
    seconds : float
        Wall time of the iterations.
    z_blocks : list
        Handles of the final Z row blocks.
    factor : handle
        Handle of W with ``K* = W W^T``, shape (n, r).
    z_values : list
        The final rows of Z with their partial sums, held by the caller.
    recoveries : int
        Restarts after lost workers.
    snapshots : dict
        ``{t: (Z_t, W_t, omega_t)}`` at the iterations asked for: Z_t CSR (n, n), W_t
        (n, r_t) with K*_t = W_t W_t^T, omega_t (m,) the weights that gave Z_t; at t = 0
        Z0, None (K*_0 has no low-rank factor) and ``sqrt(1/m)``.
    device_factor : array or None
        W on the device of a resident fit (its post-processing runs there); None elsewhere.
    """

    alpha: float
    weights: np.ndarray
    n_iter: int
    history: list
    kstar_norm: float
    converged: bool
    seconds: float
    z_blocks: list = field(repr=False, default_factory=list)
    factor: object = field(repr=False, default=None)
    z_values: list = field(repr=False, default_factory=list)
    recoveries: int = 0
    snapshots: dict = field(repr=False, default_factory=dict)
    device_factor: Any = field(repr=False, default=None)

    objective = _column("objective", "Eq. (10) after each iteration (list of float).")
    kstar_change = _column("kstar_change", "``||K*_t - K*_{t-1}||_F`` per iteration (list of float).")
    rank = _column("rank", "Rank of K*_t per iteration (list of int).")
    iteration_seconds = _column("seconds", "Wall seconds of each iteration (list of float).")
    eig_seconds = _column("eig_seconds", "Seconds of each eigendecomposition (list of float).")
    eig_threads = _column("eig_threads", "BLAS threads of each gathered step (list of int).")
    eig_parts = _column("eig_parts", "Parts of each eigendecomposition (list of dict).")
    eig_drivers = _column("eig_driver", "Eigen route of each gathered step (list of str).")


def initialise(
    runner: Any,
    kernel_blocks: Sequence[Any],
    starts: Sequence[int],
    n_kernels: int,
    n_neighbors: int,
) -> InitState:
    """Alpha-free initialisation, Eqs. (25)-(28), one pass over the row blocks.

    Parameters
    ----------
    runner : LocalRunner or DaskRunner
    kernel_blocks : list
        Handles (arrays, futures or :class:`BlockRef`) of the row blocks, shape (m, b, n).
    starts : list of int
        First row of each block.
    n_kernels : int
    n_neighbors : int

    Returns
    -------
    InitState
    """
    weights0 = np.full(n_kernels, math.sqrt(1.0 / n_kernels))
    results = runner.map(_init_block, list(zip(kernel_blocks, starts)), weights0, n_neighbors)
    parts = [runner.split(r, 3) for r in results]
    z_blocks = [p[0] for p in parts]
    gamma_blocks = [p[1] for p in parts]
    small = runner.fetch([p[2] for p in parts] + gamma_blocks)
    nb = len(starts)
    delta = np.sum(small[:nb], axis=0)
    gamma = np.concatenate(small[nb:])
    runner.release(results)
    if not np.any(delta) or not np.all(np.isfinite(delta)):  # Z0 = 0: omega (Eq. 12) undefined
        runner.release(z_blocks, gamma_blocks)
        copies = runner.fetch(runner.submit(_copies_in_block, kernel_blocks[0], starts[0]))
        raise _empty_graph_error(n_neighbors, copies)
    return InitState(list(starts), gamma_blocks, z_blocks, gamma, delta, weights0)


def with_gamma(runner, init, gamma="auto"):
    """``init`` with one scalar gamma for every sample (the paper's gamma ablation): Z0 stays
    the learned one (Eqs. 25-27); the scalar replaces gamma_i in Eqs. 13-16 and Eq. 10.

    Parameters
    ----------
    runner : LocalRunner or DaskRunner
    init : InitState
    gamma : "auto" or float
        "auto": ``init`` unchanged (the learned, per-sample gamma_i). A float > 0: that
        value for every sample.

    Returns
    -------
    InitState
        ``init`` itself for "auto", else a copy whose ``gamma`` and ``gamma_blocks``
        (sent once) hold the scalar.

    Raises
    ------
    ValueError
        ``gamma`` is neither "auto" nor a finite number > 0.
    """
    if isinstance(gamma, str) and gamma == "auto":
        return init
    g = core.check_gamma(gamma)
    if np.all(init.gamma == g):  # already this scalar (its blocks hold it): nothing to send again
        return init
    n = init.gamma.shape[0]
    bounds = [*init.starts, n]
    values = [np.full(bounds[i + 1] - bounds[i], g) for i in range(len(init.starts))]
    return replace(init, gamma_blocks=list(runner.scatter(values)), gamma=np.full(n, g))


def _copies_in_block(kernels, start, limit=3):
    """Groups of identical samples (in every normalised kernel) among a block's rows."""
    k = read_rows(kernels)
    b = k.shape[1]
    diag = k[:, np.arange(b), start + np.arange(b)]
    same = np.all(np.abs(k - diag[:, :, None]) <= 1e-9, axis=0)  # diag has the 1e-12 jitter
    groups, seen = [], set()
    for i in np.flatnonzero(same.sum(axis=1) > 1):
        if start + i in seen:
            continue
        group = np.flatnonzero(same[i]).tolist()
        seen.update(group)
        groups.append(group)
        if len(groups) == limit:
            break
    return groups


def _empty_graph_error(n_neighbors, groups):
    """The KernelInputError of an empty initial graph, naming n_neighbors (``--n-neighbors``)."""
    c = int(n_neighbors)
    template = ("the initial affinity graph Z0 is empty, so the kernel weights are undefined: for every sample, its "
                "{} + 1 = {} nearest samples in the combined kernel are tied")
    args = [Param("n_neighbors"), c + 1]
    if groups:
        shown = "; ".join(
            f"samples {', '.join(map(str, g[:12]))}{' ...' if len(g) > 12 else ''} ({len(g)} copies)" for g in groups
        )
        fewest = min(len(g) for g in groups) - 1
        template += (". The input has duplicate samples, identical in every kernel: {}. Remove the duplicates, or "
                     "choose {} at least the number of other copies of a sample ({} for the first groups)")
        args += [shown, Param("n_neighbors"), fewest]
    return with_message(KernelInputError, template, *args)


def should_stop(t, changes, kstar_norm, tol, min_iter, max_iter):
    """The reference stop rule (docs/algorithm.md section 2.5): ``t >= min_iter`` and
    ``|f_t - f_{t-1}| / ||K*_t||_F < tol``, or ``t >= max_iter``.

    Returns
    -------
    (stop, converged) : tuple of bool
    """
    if t >= min_iter and len(changes) >= 2 and kstar_norm > 0:
        if abs(changes[-1] - changes[-2]) / kstar_norm < tol:
            return True, True
    return t >= max_iter, False


@dataclass
class Step:
    """Handles of one submitted iteration, as a runner returns them.

    Attributes
    ----------
    blocks : list or handle
        The rows of Z_t with their partial sums (fetched on a stop, a checkpoint or a snapshot).
    gathered : handle or None
        The gathered step's ``(W_t, part)``.
    factor : handle
        W_t (``K*_t = W_t W_t^T``), or what the next step reads K*_t from.
    part : handle
        The gathered step's :class:`lswmkc_dask.engine._gathered.StepSummary` (the rank).
    summary : handle
        The iteration's summary, with the change of K*.
    """

    blocks: Any
    gathered: object
    factor: object
    part: object
    summary: object

    def handles(self):
        """Every handle of the step (to release or cancel)."""
        return (self.blocks, self.gathered, self.factor, self.part, self.summary)


def gathered_resources(eig_driver):
    """Worker resources of a gathered-step task: ``{"GPU": 1}`` for ``device="cuda"``."""
    return {"GPU": 1} if _eigen.eigen_spec(eig_driver).device == "cuda" else None


def _submit_step(runner, per_block, weights, prev, alpha, init, eig_driver, eig_threads, max_threads):
    factor = None if prev is None else prev.factor
    prev_part = None if prev is None else prev.part
    blocks = runner.map(_graph_block, per_block, weights, factor, float(alpha), init.weights0)
    # Fused (runner.fused_summary): the change of K* inside the gathered step (no task that
    # takes a core from a row block of t + 1). Else W_{t-1} stays out of the gathered step's
    # memory, and the change is a task of its own, run first where it is ready.
    fused = runner.fused_summary
    gathered = runner.submit(kstar_step, blocks, prev_part, eig_driver, eig_threads, max_threads, fused,
                             factor if fused else None, resources=gathered_resources(eig_driver))
    new_factor, part = runner.split(gathered, 2)
    summary = part if fused else runner.submit(kstar_summary, part, new_factor, factor, prev_part, eig_threads,
                                               max_threads, priority=1)
    return Step(blocks, gathered, new_factor, part, summary)


@dataclass
class _Wait:
    """What the caller learnt of one submitted iteration: its summary and the stop rule's verdict."""

    summary: Any
    stop: bool
    converged: bool
    z_values: Any  # the rows of Z_t with their partial sums: fetched on a stop or a checkpoint, else None


@dataclass
class _Loop:
    """The state of :func:`iterate` between its steps: ``checkpoint`` the last ``(t, rows of Z_t,
    summary of t, omega_{t+1})`` on the caller, ``ahead`` the step submitted under lookahead.
    """

    runner: Any
    init: InitState
    alpha: float
    eig_driver: Any
    eig_threads: int | None
    max_threads: int | None
    callback: Callable[..., None] | None
    recover: Callable[[BaseException], Any] | None
    checkpoint_every: int
    max_recoveries: int
    stop_rule: tuple  # (tol, min_iter, max_iter) of :func:`should_stop`
    per_block: list
    wanted: set
    stop_hook: Callable[[int, bool, bool], tuple[bool, bool]] | None = None
    history: list = field(default_factory=list)
    snaps: dict = field(default_factory=dict)
    checkpoint: tuple = (0, None, None, None)
    recoveries: int = 0
    ahead: Any = None
    ti: float = 0.0

    def submit(self, t, weights, prev):
        """Submit iteration t after ``prev`` (None: the first), with kernel weights ``weights``; by the
        runner's own ``submit_step`` where it has one (the device's).
        """
        own = getattr(self.runner, "submit_step", None)
        if own is not None:
            return own(t, self.per_block, weights, prev, self.alpha, self.init)
        return _submit_step(self.runner, self.per_block, weights, prev, self.alpha, self.init, self.eig_driver,
                            self.eig_threads, self.max_threads)

    def checkpoint_due(self, t):
        """Whether iteration ``t`` keeps a checkpoint (only with ``recover``)."""
        return self.recover is not None and t % self.checkpoint_every == 0

    def wait(self, t, current):
        """Fetch iteration ``t``'s summary (t + 1 submitted first under lookahead) and apply the stop
        rule; MemoryError where the gathered step could not hold the eigenvectors.
        """
        tol, min_iter, max_iter = self.stop_rule
        self.ahead = None
        if self.runner.lookahead and t < max_iter:
            # Its tasks derive omega_{t+1} from this step's summary themselves.
            self.ahead = self.submit(t + 1, current.part, current)
        summary = self.runner.fetch(current.summary)
        if summary.error is not None:  # the gathered step could not hold the eigenvectors
            if self.ahead is not None:
                _cancel_quietly(self.runner, self.ahead)
            raise MemoryError(summary.error)
        changes = [r.kstar_change for r in self.history] + [summary.kstar_change]
        stop, converged = should_stop(t, changes, math.sqrt(summary.kstar_sq), tol, min_iter, max_iter)
        if self.stop_hook is not None:
            stop, converged = self.stop_hook(t, stop, converged)
        z_values = self.runner.fetch(current.blocks) if stop or self.checkpoint_due(t) else None
        return _Wait(summary, stop, converged, z_values)

    def restart(self, exc, current):
        """After a lost worker: new row blocks and iteration t + 1 resubmitted from the last
        checkpoint (W recomputed from its Z). Returns ``(t, current, weights)``.
        """
        if self.recover is None or self.recoveries >= self.max_recoveries:
            raise exc
        self.recoveries += 1
        for step in (self.ahead, current):
            if step is not None:
                _cancel_quietly(self.runner, step)
        kernel_blocks, gamma_blocks = self.recover(exc)
        self.per_block = list(zip(kernel_blocks, self.init.starts, gamma_blocks))
        t, z_ck, summary_ck, weights = self.checkpoint
        del self.history[t:]
        for later in [s for s in self.snaps if s > t]:
            del self.snaps[later]
        if z_ck is None:
            current = self.submit(t + 1, weights, None)
        else:
            prev_rank = self.history[t - 2].rank if t >= 2 else None
            blocks, factor = refactor(self.runner, z_ck, prev_rank, self.eig_driver, self.eig_threads,
                                      self.max_threads)
            weights = core.kernel_weights(summary_ck.delta)
            current = self.submit(t + 1, weights, Step(blocks, None, factor, summary_ck, summary_ck))
        if self.callback is not None:
            self.callback(t, math.nan, math.nan, math.nan, restarted=f"worker lost ({type(exc).__name__}); "
                          f"resumed from iteration {t}")
        self.ti = time.perf_counter()
        return t, current, weights

    def record(self, t, weights, summary, current):
        """Iteration ``t`` into the history (objective, Eq. 10), its snapshot if asked, the callback."""
        obj = core.objective(weights, summary.delta, summary.gamma_sq_norm, summary.z_fro_sq, summary.kstar_sq,
                              self.alpha)
        now = time.perf_counter()
        self.history.append(IterationRecord(t, obj, summary.kstar_change, summary.rank, now - self.ti,
                                            summary.seconds_eig, summary.threads, summary.driver, summary.eig_parts))
        self.ti = now
        if t in self.wanted:  # the rows of Z_t (sparse) and the factor of K*_t: O(nnz + n r) here
            self.snaps[t] = (gather_affinity(self.runner, [r[0] for r in self.runner.fetch(current.blocks)]),
                             np.asarray(self.runner.fetch(current.factor)), np.asarray(weights))
        if self.callback is not None:
            self.callback(t, obj, summary.kstar_change, self.history[-1].seconds)

    def advance(self, t, current, done):
        """Iteration t + 1 in flight, a checkpoint kept if due, ``current`` released.
        Returns ``(next step, omega_{t+1})``.
        """
        next_weights = core.kernel_weights(done.summary.delta)
        if self.checkpoint_due(t):
            self.checkpoint = (t, done.z_values, done.summary, next_weights)
        ahead = self.ahead
        if ahead is None:
            self.runner.release(current.blocks)  # the rows of Z_t go before those of Z_{t+1} are formed
            ahead = self.submit(t + 1, next_weights, current)
        self.runner.release(*current.handles())
        return ahead, next_weights


def iterate(
    runner: Any,
    kernel_blocks: Sequence[Any],
    init: InitState,
    alpha: float,
    *,
    max_iter: int = 101,
    min_iter: int = 20,
    tol: float = 0.001,
    eig_driver: Any = "auto",
    eig_threads: int | None = None,
    max_threads: int | None = None,
    callback: Callable[..., None] | None = None,
    recover: Callable[[BaseException], Any] | None = None,
    checkpoint_every: int = 5,
    max_recoveries: int = 5,
    snapshots: Any = (),
    stop_hook: Callable[[int, bool, bool], tuple[bool, bool]] | None = None,
) -> FitResult:
    """Run the LSWMKC iterations for one alpha from a shared initialisation.

    Parameters
    ----------
    runner : LocalRunner, DaskRunner or lswmkc_dask.engine.device_fit.DeviceRunner
        A runner with ``submit_step`` (the device's) takes each iteration's step itself.
    kernel_blocks : list
        Row-block handles, as for :func:`initialise`.
    init : InitState
    alpha : float
        Balance hyper-parameter (``>= 0``).
    max_iter : int
        Iteration cap (the reference runs while ``t <= 100``: 101).
    min_iter : int
        The rule is not tested before this iteration (reference: 20).
    tol : float
        Tolerance on ``|f_t - f_{t-1}| / ||K*_t||_F``.
    eig_driver : {"auto", "mrrr", "subset", "evd", "lanczos"} or lswmkc_dask.core.eigen.EigenSpec
        See :func:`lswmkc_dask.core.eigen.psd_factor`; "auto" picks the route each
        iteration from the previous rank and the memory left. An EigenSpec with
        ``device="cuda"`` submits the gathered step with ``resources={"GPU": 1}``.
    eig_threads : int, optional
        BLAS threads of the gathered step (default: the cores free where it runs).
    max_threads : int, optional
        Upper bound of that default (a fit's share of a machine in a sweep).
    callback : callable, optional
        ``callback(t, objective, change, seconds)`` after each iteration, and
        ``callback(t, nan, nan, nan, restarted=message)`` after a restart.
    snapshots : sequence of int
        Iterations whose Z_t and W_t are kept (0: the initial graph), in
        :attr:`FitResult.snapshots`.
    recover : callable, optional
        ``recover(exc) -> (kernel_blocks, gamma_blocks)``: new row blocks after a worker
        was lost with data nothing can recompute. Given, the rows of Z and the summary
        are kept on the caller every ``checkpoint_every`` iterations (O(nnz)) and a loss
        resumes from the last checkpoint, W recomputed from its Z: the undisturbed
        result. None: a loss is raised.
    checkpoint_every : int
        Iterations between checkpoints.
    max_recoveries : int
        Restarts before the loss is raised.
    stop_hook : callable, optional
        ``stop_hook(t, stop, converged) -> (stop, converged)``: the stop rule's verdict at
        iteration t as the caller's rule amends it (a resident mixed-precision fit holds it
        until two changes between float64 K*s compare:
        :class:`lswmkc_dask.engine.device_fit.PrecisionSwitch`).

    Returns
    -------
    FitResult

    Raises
    ------
    concurrent.futures.CancelledError, distributed.scheduler.KilledWorker
        A lost worker without ``recover``, or more than ``max_recoveries`` times.
    """
    t0 = time.perf_counter()
    loop = _Loop(runner, init, alpha, eig_driver, eig_threads, max_threads, callback, recover, checkpoint_every,
                 max_recoveries, (tol, min_iter, max_iter), list(zip(kernel_blocks, init.starts, init.gamma_blocks)),
                 {int(s) for s in snapshots}, stop_hook)
    weights = core.kernel_weights(init.delta)
    current = loop.submit(1, weights, None)
    loop.checkpoint = (0, None, None, weights)
    if 0 in loop.wanted:  # Z0 (K*_0 = K_w0 has no low-rank factor)
        loop.snaps[0] = (gather_affinity(runner, init.z_blocks), None, np.asarray(init.weights0))
    t = 0
    loop.ti = time.perf_counter()
    while True:
        t += 1
        try:
            done = loop.wait(t, current)
        except lost_errors() as exc:
            t, current, weights = loop.restart(exc, current)
            continue
        loop.record(t, weights, done.summary, current)
        if done.stop:
            if loop.ahead is not None:
                runner.cancel(*loop.ahead.handles())
            break
        current, weights = loop.advance(t, current, done)
    runner.release(current.blocks, current.gathered, current.part, current.summary)
    return FitResult(
        alpha=float(alpha),
        weights=weights,
        n_iter=t,
        history=loop.history,
        kstar_norm=math.sqrt(done.summary.kstar_sq),
        converged=done.converged,
        seconds=time.perf_counter() - t0,
        z_blocks=[r[0] for r in done.z_values],
        factor=current.factor,
        z_values=done.z_values,
        recoveries=loop.recoveries,
        snapshots=loop.snaps,
    )


def _cancel_quietly(runner, step):
    try:
        runner.cancel(*step.handles())
    except Exception:  # noqa: BLE001 - the cluster may be gone; nothing to keep
        pass


def refactor(runner, z_values, prev_rank, eig_driver="auto", eig_threads=None, max_threads=None):
    """Handles of the rows of Z held on the caller and of W from them (after a loss; ``prev_rank``,
    W_{t-1}'s, chooses the undisturbed step's route).
    """
    blocks = runner.scatter(z_values)
    return blocks, runner.submit(factor_from_blocks, blocks, prev_rank, eig_driver, eig_threads, max_threads,
                                 resources=gathered_resources(eig_driver))


def gather_affinity(runner, z_blocks):
    """The affinity graph Z as a CSR matrix of shape (n, n) on the caller (O(nnz)), from
    handles of its row blocks or the rows themselves.
    """
    if all(sp.issparse(z) for z in z_blocks):
        return stack_rows(z_blocks)
    return runner.fetch(runner.submit(stack_rows, z_blocks))
