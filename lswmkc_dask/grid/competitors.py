"""The paper's compared methods (:mod:`lswmkc_dask.methods`) as grid runs of ``lswmkc compare``.

Every (method, hyper-parameter value) is one task: on a Dask cluster the preprocessed base
kernels are read from the kernel store once into a dense (m, n, n) stack by a task (so Dask
can recompute it when a worker is lost), every run is a task on that stack, and they spread
over the workers; without a cluster they run one after another in this process. Each run ends
with LSWMKC's final clustering and both protocols' metrics, and is written by the caller's
``record`` as it finishes, so an interrupted comparison resumes where it stopped.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.runners import kernel_blocks, read_rows
from ..engine.scheduler import workers_of
from ..methods import METHODS as REGISTRY
from ..methods import get_method
from ..report.metrics import evaluate, protocol_metrics, repeat_metrics
from .baselines import BaselineResult

if TYPE_CHECKING:
    from ..io.inputs import KernelStack

#: The compared methods of :mod:`lswmkc_dask.methods`, by the names ``--methods`` takes.
COMPETITORS = tuple(REGISTRY)
#: Memory of a run on one worker, in multiples of the dense stack: the stack, one combined
#: kernel per hyper-parameter step and the method's n x n work arrays.
STACK_FACTOR = 3.0


def method_title(name: str) -> str:
    """The method's citation line (the first line of its class docstring), e.g. ``"MKKM (Huang et al. 2012)"``."""
    doc = (get_method(name).__doc__ or name).strip().splitlines()[0].strip().rstrip(".")
    return doc


def competitor_grid(name: str, grid: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every hyper-parameter point of a method's grid, in order.

    Parameters
    ----------
    name : str
        A key of :data:`COMPETITORS`.
    grid : dict, optional
        ``{parameter: values}`` replacing the method's own ``param_grid`` (its paper's or
        demo's) for the parameters it names.

    Returns
    -------
    list of dict
        One ``{parameter: value}`` per run (``[{}]`` for a method without hyper-parameter).

    Raises
    ------
    ValueError
        An unknown method, or a parameter the method does not have.
    """
    cls = get_method(name)
    full = {k: tuple(v) for k, v in cls.param_grid.items()}
    known = cls().get_params()
    for key, values in (grid or {}).items():
        if key not in known:
            raise ValueError(f"{name} has no hyper-parameter {key!r}; it has {', '.join(sorted(known))}")
        full[key] = tuple(values)
    keys = list(full)
    return [{k: plain(v) for k, v in zip(keys, values)} for values in itertools.product(*full.values())]


def plain(value: Any) -> Any:
    """A grid value as JSON keeps it: a NumPy scalar as the Python number, anything else as is."""
    return value.item() if isinstance(value, np.generic) else value


def _stack(blocks):
    """The dense (m, n, n) stack of the row blocks (on one worker)."""
    return np.concatenate([read_rows(b) for b in blocks], axis=1)


def run_one(kernels: np.ndarray, name: str, param: dict, labels_true: Any, params: dict) -> BaselineResult:
    """One run of a compared method on the preprocessed stack, ending as LSWMKC ends.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
        Preprocessed base kernels.
    name : str
    param : dict
        The grid point.
    labels_true : ndarray of shape (n,) or None
    params : dict
        ``n_clusters``, ``n_init``, ``random_state``, optional ``seeds`` (``eig_threads`` is
        not used: a method's fit sets its own BLAS threads, bounded by the Dask worker's).

    Returns
    -------
    BaselineResult
        ``seconds``: the method's own iterations; ``cluster_seconds``: the common final step.
    """
    k, n_init, seed = params["n_clusters"], params["n_init"], params["random_state"]
    model = get_method(name)(n_clusters=k, preprocess=False, n_init=n_init, random_state=seed, **param)
    model.fit(kernels)  # its BLAS threads as the estimator sets them (bounded by the worker's threads)
    t0 = time.perf_counter()
    h = model.embedding_
    metrics, extra = None, {}
    if labels_true is not None:
        if h is None:  # the method assigns its own labels: one partition, both protocols
            own = evaluate(labels_true, model.labels_)
            metrics = {"honest": own, "paper": dict(own)}
        else:
            metrics = protocol_metrics(labels_true, model.labels_, h, k, n_init, seed)
            seeds = params.get("seeds")
            if seeds is not None and len(seeds) > 1:
                extra["repeats"] = repeat_metrics(h, labels_true, k, n_init, seeds, first=metrics)
    extra.update(_json_ready_extra(model.extra_))
    return BaselineResult(
        method=name, param=dict(param), labels=model.labels_, embedding=h if h is not None else np.zeros((0, 0)),
        metrics=metrics, seconds=float(model.seconds_),
        cluster_seconds=float(model.cluster_seconds_) + time.perf_counter() - t0,
        kernel_weights=np.asarray(model.kernel_weights_), objective=list(model.objective_), n_iter=model.n_iter_,
        converged=model.converged_, extra=extra, title=method_title(name),
    )


def _json_ready_extra(extra):
    """The small parts of a method's ``extra_`` (vectors and histories; no n x n or n x k matrix)."""
    out = {}
    for key, value in extra.items():
        a = np.asarray(value) if isinstance(value, np.ndarray | list | tuple) else None
        if a is not None and a.dtype != object and a.size > 4096:
            continue
        out[key] = value
    return out


def run_competitors(
    store: KernelStack,
    client: Any,
    todo: list[tuple[str, dict]],
    params: dict,
    labels_true: Any,
    record: Callable[[BaselineResult], Any],
    block_rows: int | None = None,
) -> None:
    """Run the compared methods' grid points ``todo`` on ``client`` (None: this process).

    Parameters
    ----------
    store : KernelStack
        The preprocessed base kernels.
    client : distributed.Client or None
    todo : list of (str, dict)
        ``(method, grid point)`` pairs, e.g. ``("mkkm-mr", {"lambda_": 0.5})``.
    params : dict
        As :func:`run_one`.
    labels_true : ndarray of shape (n,) or None
    record : callable
        ``record(BaselineResult)`` as each run finishes (in the order they finish on a cluster).
    block_rows : int, optional
        Rows per block read from the store on Dask.

    Raises
    ------
    MemoryError
        No worker's memory limit holds the dense stack and a method's work arrays
        (:data:`STACK_FACTOR` times the stack), checked before any work.
    """
    if not todo:
        return
    if client is None:
        kernels = store.read_rows(0, store.n_samples)
        for name, param in todo:
            record(_with_execution(run_one(kernels, name, param, labels_true, params), "in-process"))
        return
    from distributed import as_completed

    workers = workers_of(client)
    need = STACK_FACTOR * store.nbytes
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
    if limits and all(0 < lim < need for lim in limits):
        raise MemoryError(f"the compared methods hold the dense kernel stack ({store.nbytes / 2**30:.2f} GiB) and "
                          f"their work arrays on one worker, about {need / 2**30:.2f} GiB; the largest worker "
                          f"memory limit is {max(limits) / 2**30:.2f} GiB")
    blocks, _ = kernel_blocks(client, store, block_rows, True)
    stack = client.submit(_stack, blocks, pure=False)
    execution = f"Dask: {len(workers)} workers at {client.scheduler.address}"
    futures = [client.submit(run_one, stack, name, param, labels_true, params, pure=False) for name, param in todo]
    try:
        for future in as_completed(futures, loop=client.loop):
            record(_with_execution(future.result(), execution))
            future.release()
    finally:
        client.cancel([stack, *futures, *[b for b in blocks if hasattr(b, "key")]])


def _with_execution(result, execution):
    result.execution = execution
    return result
