"""Where a fit or a sweep's grid runs, on which device and by which route: one choice.

:func:`choose_route` is asked by every fit (:func:`run_fit`) and once for a whole grid
(:func:`lswmkc_dask.grid._routes.run_grid`). It
resolves ``eig_device`` once (:func:`lswmkc_dask.engine.gpu.resolve_device`, before any
iteration) and picks one of :data:`ROUTES` (docs/algorithm.md section 5): ``"resident"``
(the whole iteration on this machine's GPU, :func:`lswmkc_dask.engine.device_route.resident_plan`),
``"in-process"``, ``"task"`` (one fit on a GPU worker, or a grid's task mode) or
``"blockwise"``. ``eig_precision="mixed"`` runs resident only (:func:`check_precision`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import DeviceFallbackWarning, Param, ParameterError, warn_at_caller
from ..io.inputs import KernelStack, feature_source, is_stack, is_store
from ..io.store import open_store, prepare
from ..kernels.features import FeatureKernels, canonical_kernel
from ..records import FitOptions, LSWMKCResult
from .device_route import (
    STACK_DTYPES,
    ResidentRefusal,
    ResidentStack,
    features_stack,
    fit_on_device,
    needs_blockwise,
    resident_plan,
)
from .fit import fit_store
from .gpu import resolve_device
from .scheduler import smallest_memory_limit, wait_for_workers, workers_of
from .where import Where

#: The routes of :func:`choose_route`, in the order it tries them.
ROUTES = ("resident", "in-process", "task", "blockwise")

#: A grid's task mode while the kernel stack is at most this many bytes (and a quarter
#: of a worker's memory limit).
TASK_MODE_MAX_BYTES = 512 * 2**20


@dataclasses.dataclass(frozen=True)
class Route:
    """Where a fit, or every grid point of a sweep, runs (:func:`choose_route`).

    Attributes
    ----------
    name : str
        One of :data:`ROUTES`.
    eig_device : {"cpu", "cuda"}
        ``eig_device`` resolved: where the gathered steps go.
    client : distributed.Client or None
        The cluster it runs on (None: this process).
    workers : mapping
        The scheduler's workers when the route was chosen (on a cluster; empty otherwise).
    """

    name: str
    eig_device: str
    client: Any = None
    workers: Mapping = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def options(self, options: FitOptions) -> FitOptions:
        """``options`` with the resolved device, and ``resident="cuda"`` on the resident route.

        Parameters
        ----------
        options : FitOptions
            ``eig_device`` as asked.

        Returns
        -------
        FitOptions
        """
        return dataclasses.replace(options, eig_device=self.eig_device,
                                   resident="cuda" if self.name == "resident" else options.resident)


def _refuse_mixed(why: str = "") -> ParameterError:
    """The refusal of ``eig_precision="mixed"`` off the resident route (``why``: the figures)."""
    return ParameterError("{} needs the resident route (a GPU, {}): the CPU routes use LAPACK in float64 or "
                          "float32{}", Param("eig_precision", "mixed"), Param("eig_device", "cuda"),
                          f"; {why}" if why else "")


def check_precision(eig_precision: str, eig_device: str, resident: str | None = None) -> None:
    """Refuse ``eig_precision="mixed"`` where no machine could run it resident, before any work.

    Parameters
    ----------
    eig_precision, eig_device : str
        As asked.
    resident : str or None
        :attr:`lswmkc_dask.records.FitOptions.resident`.

    Raises
    ------
    lswmkc_dask.errors.ParameterError
        "mixed" with ``eig_device="cpu"`` and no ``resident`` (:func:`choose_route`
        refuses the rest once the device is known).
    """
    if eig_precision == "mixed" and resident is None and eig_device == "cpu":
        raise _refuse_mixed()


def _warn_blockwise(why: str) -> None:
    """A ``DeviceFallbackWarning``: the stack does not fit the GPU (the user's line named)."""
    warn_at_caller(f"the whole iteration cannot stay on the GPU: {why}; the row blocks run on the CPU, the eigen "
                   "step on the GPU", DeviceFallbackWarning)


def _resident_here(m: int, n: int, itemsize: int, where: Where, eig_device: str, snapshots: Any,
                   precision: str, **off_device: Any) -> bool:
    """Whether an (m, n, n) stack of ``itemsize`` bytes runs wholly on this machine's GPU: no
    cluster given and :func:`~lswmkc_dask.engine.device_route.resident_plan` (the stack on the
    device, else in host memory or, with ``off_device="features"``, rebuilt from the views; else
    a warning with its figures).
    """
    if eig_device == "cpu" or not where.runs_here():
        return False
    device = resolve_device(eig_device, n, None)  # "cuda" without a GPU here: refused
    resident, why = resident_plan(m, n, itemsize, device, snapshots=snapshots, precision=precision, **off_device)
    if why and precision == "mixed":
        raise _refuse_mixed(why)
    if why:
        _warn_blockwise(why)
    return resident


def features_resident(fk: Any, options: FitOptions, client: Any = None, stack_dtype: str = "float64") -> bool:
    """Whether a fit from feature views builds its kernels on this machine's GPU and runs resident there.

    The rule of :func:`choose_route`'s resident route for the stack the views will give
    (:func:`lswmkc_dask.engine.device_route.features_stack`: on the device, else rebuilt from
    the views each pass), with every view non-constant
    (a constant view gives a degenerate kernel, which the host route names and handles).

    Parameters
    ----------
    fk : lswmkc_dask.FeatureKernels
        m views of n samples.
    options : FitOptions
        ``eig_device``, ``eig_precision`` and ``snapshot_iterations`` as asked.
    client : distributed.Client, str, Where or None
        As :func:`choose_route`.
    stack_dtype : {"float64", "float32"}
        The precision the stack would be built in.

    Returns
    -------
    bool

    Raises
    ------
    lswmkc_dask.engine.gpu.DeviceUnavailableError
        ``eig_device="cuda"`` with no GPU here.
    """
    m, n, _ = fk.shape
    if options.resident is not None or not all(float(b) > 0 for b in fk.bandwidths):
        return False
    return _resident_here(m, n, STACK_DTYPES[stack_dtype], Where.of(client), options.eig_device,
                          options.snapshot_iterations, options.eig_precision, off_device="features",
                          feature_columns=sum(int(v.shape[1]) for v in fk.views))


def _poly(params: dict | None) -> dict:
    """``kernel_params`` with the defaults of "poly" filled in (two equal kernels compare equal)."""
    return {"degree": 2, "coef0": 1.0, **(params or {})}


def open_kernels(X: Any, *, kernel: str = "precomputed", kernel_params: dict | None = None,
                 block_rows: int | None = None, degenerate_kernels: str = "warn", options: FitOptions | None = None,
                 client: Any = None, stack_dtype: str = "float64") -> KernelStack:
    """The preprocessed kernels of what an entry point was given, opened once: the one input step of
    :meth:`lswmkc_dask.LSWMKC.fit`, :func:`lswmkc_dask.sweep`, :func:`lswmkc_dask.grid.compare.compare`,
    the baselines, the compared methods and the command line.

    Parameters
    ----------
    X : KernelStack, str, Path, array_like or list
        A kernel stack (:class:`lswmkc_dask.io.inputs.KernelStack`: returned as it is), the path or
        URL of a store (opened, :func:`lswmkc_dask.open_store`); with ``kernel="precomputed"`` a
        kernel file (``.mat``/``.npz``) or raw base kernels of shape (m, n, n) or a list of m arrays
        of shape (n, n); otherwise a list of m feature views, each of shape (n, d_v), or one array
        of shape (n, d), or a :class:`lswmkc_dask.FeatureKernels` (whatever ``kernel`` says). A store
        with a ``kernel`` other than "precomputed" must have been prepared from views with that kernel.
    kernel : {"precomputed", "rbf", "linear", "poly"}
        The kernel built from each view (aliases "gaussian", "polynomial").
    kernel_params : dict, optional
        "poly": ``degree`` (default 2) and ``coef0`` (default 1.0).
    block_rows : int, optional
        Rows per block of kernels preprocessed here.
    degenerate_kernels : {"warn", "drop", "error"}
        See :func:`lswmkc_dask.prepare`.
    options : FitOptions, optional
        The fit the kernels are for: feature views whose fit runs wholly on this machine's GPU
        (:func:`features_resident`) have their kernels built there (a
        :class:`lswmkc_dask.engine.device_route.ResidentStack`). None: never on a device.
    client : distributed.Client, str, Where or None
        Where the fit runs (as :func:`choose_route`).
    stack_dtype : {"float64", "float32"}
        The precision of kernels built on the GPU.

    Returns
    -------
    KernelStack
        A KernelStore (a store), an ArrayStack (anything preprocessed here: in memory, the numbers
        :func:`lswmkc_dask.prepare` writes into a store) or a ResidentStack.

    Raises
    ------
    KernelInputError, FileNotFoundError
        Unusable kernels or features (see :func:`lswmkc_dask.prepare`); a store with another kernel
        than the store's, or a kernel file with a kernel built from features.
    ValueError
        Unknown ``kernel`` or ``kernel_params``.
    lswmkc_dask.engine.gpu.DeviceUnavailableError
        ``options.eig_device="cuda"`` with no GPU here, for feature views.
    """
    precomputed = canonical_kernel(kernel, precomputed=True) == "precomputed"
    if precomputed and kernel_params and not isinstance(X, FeatureKernels):
        raise ValueError(f"kernel_params {sorted(kernel_params)} given with kernel='precomputed', which takes none")
    if is_store(X):  # with a kernel built from views: a store prepared from views with that kernel, else refused
        store = X if is_stack(X) else open_store(X)
        views = None if precomputed or not hasattr(store, "feature_views") else store.feature_views()
        if not precomputed and (views is None or (views.kernel, _poly(views.kernel_params))
                                != (canonical_kernel(kernel), _poly(kernel_params))):
            feature_source(X, kernel, kernel_params)  # another kernel than the store's: KernelInputError
        return store
    source = feature_source(X, kernel, kernel_params)
    if source is not None and options is not None and features_resident(source, options, client, stack_dtype):
        return features_stack(source, "cuda", stack_dtype)  # the fit wholly on this GPU: its kernels built there
    return prepare(X if source is None else source, None, block_rows=block_rows, degenerate_kernels=degenerate_kernels)


def _task_mode(mode: str, stack: int, workers: Mapping) -> bool:
    """Whether a grid of a ``stack``-byte kernel stack runs in task mode on ``workers``."""
    smallest = smallest_memory_limit(workers)
    return mode == "task" or (
        mode == "auto" and stack <= TASK_MODE_MAX_BYTES and (not smallest or stack <= smallest / 4)
    )


def choose_route(store: KernelStack, client: Any = None, *, eig_device: str = "cpu",
                 eig_precision: str = "float64", snapshots: Any = (), grid_mode: str | None = None,
                 n_workers: int | None = None, processes: bool | None = None, resident: str | None = None) -> _Choice:
    """Where a fit (or a sweep's grid) runs, on which device and by which route (the module).

    Parameters
    ----------
    store : KernelStack
        The preprocessed kernels, shape (m, n, n) (a ResidentStack: on this GPU already,
        the resident route).
    client : distributed.Client, str, Where or None
        As :class:`lswmkc_dask.LSWMKC` ``client``; None: the active client, else this
        process (a LocalCluster above :data:`lswmkc_dask.engine.cluster.IN_PROCESS_MAX_BYTES`).
    eig_device : {"cpu", "cuda", "auto"}
        As asked.
    eig_precision : str
        "float32", like ``snapshots``, takes the blockwise route
        (:func:`lswmkc_dask.engine.device_route.needs_blockwise`); "mixed" the resident
        route, refused where there is none.
    snapshots : sequence of int
        ``snapshot_iterations`` asked for.
    grid_mode : {"auto", "task", "blockwise"} or None
        None: one fit ("task": one task on a GPU worker, for a store on disk). A grid on a
        cluster: task mode, blockwise, or by the stack's size ("auto": at most
        :data:`TASK_MODE_MAX_BYTES` and a quarter of a worker's memory limit).
    n_workers, processes : optional
        A LocalCluster to start; fill in a Where's that are None.
    resident : str or None
        :attr:`lswmkc_dask.records.FitOptions.resident`: the fit runs resident on this
        namespace whatever the route ("mixed" allowed anywhere).

    Returns
    -------
    context manager
        ``with choose_route(...) as route``: the :class:`Route`; a client opened here
        closes on exit.

    Raises
    ------
    lswmkc_dask.engine.gpu.DeviceUnavailableError
        ``eig_device="cuda"`` where no GPU can run the gathered step.
    lswmkc_dask.errors.ParameterError
        ``eig_precision="mixed"`` where the work cannot run resident.
    ConnectionError
        As :func:`lswmkc_dask.engine.cluster.connect`.
    """
    check_precision(eig_precision, eig_device, resident)
    where = Where.of(client)
    if where.n_workers is None and where.processes is None:
        where = dataclasses.replace(where, n_workers=n_workers, processes=processes)
    precision = eig_precision if resident is None else "float64"  # a resident namespace: the route is not used
    return _Choice(store, where, eig_device, precision, snapshots, grid_mode)


class _Choice:
    """:func:`choose_route`'s context manager: the choice made on entering (a warning there
    names the user's line), the client opened here closed on exit.
    """

    def __init__(self, store, where, eig_device, eig_precision, snapshots, grid_mode):
        self.store, self.where, self.eig_device = store, where, eig_device
        self.eig_precision, self.snapshots, self.grid_mode = eig_precision, snapshots, grid_mode
        self.opened: contextlib.ExitStack | None = None

    def __enter__(self) -> Route:
        store = self.store
        if isinstance(store, ResidentStack) or _resident_here(
            store.n_kernels, store.n_samples, store.itemsize, self.where, self.eig_device, self.snapshots,
            self.eig_precision,
        ):
            return Route("resident", "cuda")
        mixed = self.eig_precision == "mixed"
        if mixed and self.where.runs_here():  # no GPU here, or "auto" below its n: nothing opened yet
            raise _refuse_mixed()
        with contextlib.ExitStack() as stack:
            c = stack.enter_context(self.where.open(store.nbytes))
            device = resolve_device(self.eig_device, store.n_samples, c)  # "auto": by n and the devices there
            if c is None:
                route = Route("in-process", device)
            elif self.grid_mode is None:  # one fit: one task on a GPU worker, which reads the store
                blockwise = needs_blockwise(self.snapshots, self.eig_precision)
                task = device == "cuda" and not store.in_memory and not blockwise
                route = Route("task" if task else "blockwise", device, c)
            else:
                wait_for_workers(c)
                workers = workers_of(c)
                task = _task_mode(self.grid_mode, store.nbytes, workers)
                route = Route("task" if task else "blockwise", device, c, workers)
            if mixed and (route.name != "task" or self.grid_mode is not None):  # one fit on a GPU worker only
                raise _refuse_mixed("on a cluster, one fit runs resident on a GPU worker (a store on disk)")
            self.opened = stack.pop_all()  # closed by __exit__ from here on
        return route

    def __exit__(self, *exc: Any) -> None:
        opened, self.opened = self.opened, None
        if opened is not None:
            opened.__exit__(*exc)  # an error of the work reaches the client's own exit (a lost scheduler named)


def _fit_location(location: Any, options: FitOptions) -> LSWMKCResult:
    """A resident fit of the kernel store at ``location``, run on the GPU worker it is sent to."""
    return fit_on_device(open_store(location), options)


def _one_task(store: KernelStack, options: FitOptions, client: Any) -> LSWMKCResult | None:
    """The whole fit as one task on a GPU worker (the "task" route of one fit), or None where
    the worker's device cannot hold the stack (a warning with its figures).
    """
    future = client.submit(_fit_location, store.location, dataclasses.replace(options, resident="cuda"),
                           resources={"GPU": 1}, pure=False, retries=2)
    try:
        return future.result()
    except ResidentRefusal as exc:
        _warn_blockwise(exc.why)
        return None
    finally:
        future.release()


def run_fit(
    store: Any,
    options: FitOptions,
    client: Any = None,
    *,
    n_workers: int | None = None,
    processes: bool | None = None,
    block_rows: int | None = None,
    cache_kernels: str | bool = "auto",
    callback: Callable[..., None] | None = None,
) -> LSWMKCResult:
    """One whole fit of a kernel store, by the route :func:`choose_route` chooses.

    Parameters
    ----------
    store : KernelStack
        Preprocessed base kernels, shape (m, n, n).
    options : FitOptions
        The fit's settings, ``eig_device`` as asked ("cpu", "cuda", "auto").
    client, n_workers, processes
        As :func:`choose_route`.
    block_rows, cache_kernels, callback
        As :func:`lswmkc_dask.engine.fit.fit_store`.

    Returns
    -------
    LSWMKCResult
        ``eig_device`` the resolved device, ``execution`` where it ran.

    Raises
    ------
    lswmkc_dask.engine.gpu.DeviceUnavailableError
        ``eig_device="cuda"`` where no GPU can run the gathered step (before any iteration).
    MemoryError, ConnectionError, KernelInputError
        As :func:`lswmkc_dask.engine.fit.fit_store`.
    """
    with choose_route(store, client, eig_device=options.eig_device, eig_precision=options.eig_precision,
                      snapshots=options.snapshot_iterations, n_workers=n_workers, processes=processes,
                      resident=options.resident) as route:
        options = route.options(options)
        result = _one_task(store, options, route.client) if route.name == "task" else None
        if result is None and route.name == "task" and options.eig_precision == "mixed":
            raise _refuse_mixed("the GPU worker cannot hold the kernel stack")
        if result is None:  # every other route, or the worker's device refused the stack
            result = fit_store(store, options, route.client, block_rows=block_rows, cache_kernels=cache_kernels,
                               callback=callback)
    result.kernel_names = result.kernel_names or store.kernel_names
    return result
