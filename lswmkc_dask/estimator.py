"""LSWMKC as a scikit-learn style estimator running on Dask."""

from __future__ import annotations

from typing import Any

import os

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import TransformerTags

from ._logging import get_logger
from .engine.where import Where
from ._validate import InvalidParameter as InvalidParameter  # re-exported (defined here before)
from ._validate import check_hyperparameters, check_iterations, check_params, validate
from .errors import Param, ParameterError, Verbatim
from .io import KernelStore, count_classes
from .io.inputs import KERNEL_PARAMS as KERNEL_PARAMS  # re-exported (defined here before)
from .io.inputs import as_store, feature_source
from .report.metrics import PROTOCOLS, evaluate, evaluate_embedding
from .records import FitOptions, LSWMKCResult
from .engine.device_route import ResidentStack, features_stack
from .engine.route import check_precision, features_resident, run_fit
from ._params import DEFAULTS, parameter_constraints
from ._params import MIN_ITER as MIN_ITER  # re-exported (the command line reads it here)
from .engine.progress import Progress
from .io.model_file import load_model, save_model
from .predict import predict_labels, prediction_state, transform_samples
from .report.record import snapshot_record, warn_snapshots_not_reached

_log = get_logger(__name__)

__all__ = ["LSWMKC", "as_store", "check_hyperparameters", "check_iterations", "check_params", "lswmkc"]


def _portable(client):
    """Whether ``client`` can be copied and pickled: None, an address, or a :class:`Where` holding no live client."""
    if isinstance(client, Where):
        client = client.client
    return client is None or isinstance(client, str)


class LSWMKC(ClusterMixin, BaseEstimator):
    """Local Sample-weighted Multiple Kernel Clustering (Li et al., IEEE TNNLS).

    Learns kernel weights omega (Eqs. 11-12), a consensus affinity graph Z whose rows
    are projected onto the simplex (Eqs. 13-16, Theorem 1) and a neighbourhood kernel
    K* (Theorem 2), alternately, from the initialisation of Eqs. (25)-(28); then
    clusters K* with kernel k-means (docs/algorithm.md section 3).

    Where it runs (see :func:`lswmkc_dask.engine.cluster.execution`): on ``client`` if given,
    else on the Dask client active in the process, else in this process (no worker
    processes are started, so plain scripts, ``python - < script.py`` and notebooks
    work without a ``__main__`` guard), or on a LocalCluster of ``n_workers`` worker
    processes when asked. Row-block steps run on the workers; the eigendecomposition
    and the k-means run as tasks on one worker.

    Parameters
    ----------
    n_clusters : int or None, default None
        k, number of clusters, ``2 <= k < n``. None: the number of distinct labels
        stored with the kernels (``Y`` of a ``.mat`` file, ``labels`` of an ``.npz`` file
        or of a store); without stored labels it must be given.
    alpha : float, default 1.0
        Balance hyper-parameter of the neighbourhood-kernel term (Eq. 10), in
        ``[0, 1e300]`` (:data:`lswmkc_dask.core.ALPHA_MAX`: beyond about 9e307 the
        update of Z overflows float64).
    n_neighbors : int, default 5
        c, neighbours per sample in the initial graph (Eq. 28), ``1 <= c <= n - 2``.
    gamma : "auto" or float, default "auto"
        "auto": the learned per-sample gamma_i of Eqs. (25)-(27), the method's own
        (and the reference's). A float in ``[1e-12, 1e300]``
        (:data:`lswmkc_dask.core.GAMMA_MIN`, :data:`~lswmkc_dask.core.equations.GAMMA_MAX`:
        outside, the update of Z loses every entry to rounding or overflows): one gamma for every sample in the updates
        of Z and the objective (the paper's ablation "tuning gamma by grid search";
        the initial graph Z0 stays the learned c-neighbour one, see
        :func:`lswmkc_dask.engine.solver.with_gamma`).
    snapshot_iterations : sequence of int, optional
        Iterations (0 = the initialisation) whose affinity graph Z_t and factor W_t of
        K*_t are kept in ``snapshots_`` (the paper's evolution figures); an
        iteration beyond the last one run is not kept, and a
        :class:`~lswmkc_dask.errors.SnapshotWarning` lists those.
    kernel : {"precomputed", "rbf", "linear", "poly"}, default "precomputed"
        "precomputed": ``fit(X)`` takes base kernels. Otherwise ``fit(X)`` takes a list
        of m feature views of shape (n, d_v) and builds one kernel per view, blockwise:
        "rbf" ``exp(-D2 / mean(D2))`` on z-scored features (bandwidth = the mean
        squared pairwise distance), "linear" ``X X^T``, "poly"
        ``(X X^T / d + coef0)^degree``. The command line's spellings are aliases:
        "gaussian" for "rbf", "polynomial" for "poly".
    kernel_params : dict, optional
        For "poly": ``degree`` (default 2), ``coef0`` (default 1.0).
    max_iter : int, default 100
        Iteration cap (the reference code stops at 101).
    tol : float, default 1e-3
        Stop when ``|f_t - f_{t-1}| / ||K*_t||_F < tol`` with
        ``f_t = ||K*_t - K*_{t-1}||_F``, once ``t >= min_iter``.
    min_iter : int, default 20
        The stop rule is not tested earlier (reference: 20). At most ``max_iter``
        (:func:`check_iterations`); the default 20 is simply not reached when
        ``max_iter`` is smaller.
    n_init : int, default 50
        k-means starts for ``labels_`` (lowest inertia kept) and runs of the paper
        protocol in :meth:`evaluate`; at most 10,000 (``lswmkc_dask._params.N_INIT_MAX``).
    random_state : int or None, default 0
        Seed of the k-means starts (the CLI's default too).
    degenerate_kernels : {"warn", "drop", "error"}, default "warn"
        A base kernel that is numerically constant: kept as the reference code keeps
        it, with a warning; dropped; or refused (see :func:`lswmkc_dask.prepare`).
    eig_driver : {"auto", "mrrr", "subset", "evd", "lanczos"}, default "auto"
        LAPACK route for the positive eigenpairs of ``(Z + Z^T)/2``
        (:func:`lswmkc_dask.core.eigen.psd_factor`): "mrrr" (tridiagonal reduction, then the
        eigenpairs of the positive eigenvalues only by LAPACK ``dstemr``; memory
        ``max(n^2, n^2/2 + n r) x 8`` bytes), "subset" (SciPy's
        ``subset_by_value=(0, inf)``, 2 n^2 x 8 bytes), "evd" (full
        divide-and-conquer, about 4 n^2 x 8 bytes) or "lanczos" (ARPACK on the sparse
        S, no dense n x n array; for a small positive part, else it falls back to
        "mrrr"). "auto" chooses each iteration from the previous rank r of K*:
        "lanczos" while r <= 5% of n (from n = 1000), "subset" while r <= 15%, "evd"
        from 60%, "mrrr" between and at the first step, each only where its memory fits the worker
        (crossovers measured on 2 cores: benchmarks/README.md); ``eig_drivers_``
        records the choice. All routes give K* equal to 1e-10.
    eig_precision : {"float64", "float32", "mixed"}, default "float64"
        Precision of the eigendecomposition of S. "float64" reproduces the reference.
        "float32" (opt-in): the dense eigendecomposition in float32, refined in float64
        by Rayleigh-Ritz on the subspace it returns
        (:func:`lswmkc_dask.core.eigen.psd_factor`); ``eig_drivers_`` records
        "float32-rr". A step whose previous K* had rank above 30% of n runs in float64
        (the refinement would cost more than float32 saves). Its effect on weights, iterations and labels: benchmarks/README.md.
        "mixed": the resident route only (a GPU: ``eig_device="cuda"`` or "auto" with
        CuPy): K*'s positive part by a float16 polynomial (tensor cores) in the early iterations
        (``eig_drivers_`` "resident float16 polynomial"), float64 eigh near the stop rule,
        which it decides, and for the final K*; refused on the CPU routes before any work.
    eig_device : {"cpu", "cuda", "auto"}, default "cpu"
        Where the fit runs. "cuda": on a GPU through CuPy (``pip install
        '.[gpu]'`` in the checkout), code written against the array API. Where the device holds
        the kernel stack (about ``(m + 5) n^2 x 8`` bytes against its free memory) the
        whole iteration stays there (:mod:`lswmkc_dask.engine.device_fit`, docs/algorithm.md
        section 5): on this machine without a client, or as one task on a worker with
        ``resources={"GPU": 1}`` for a store on disk with a client (start such workers
        with ``dask worker ADDRESS --resources GPU=1``). Otherwise (the stack does not
        fit: a ``DeviceFallbackWarning`` with the figures; snapshots; float32
        precision) the row blocks run on the CPU and the gathered eigendecomposition on
        the GPU (:mod:`lswmkc_dask.engine.gpu`), on a cluster as a task on a GPU worker. Without
        a device, :class:`lswmkc_dask.engine.gpu.DeviceUnavailableError` before any data is
        read. Where the GPU cannot take even S (free memory; cuSOLVER's size limit on
        CUDA runtimes before 13) the step runs on the CPU with a
        ``DeviceFallbackWarning``. "auto": the GPU from ``lswmkc_dask.engine.gpu.GPU_MIN_N``
        samples (1000, from the H200 measurement in its docstring) when there is one,
        else the CPU. Sweeps and comparisons take it too (:func:`lswmkc_dask.sweep`);
        ``report.json`` records the route and where each step ran.
    eig_threads : int, optional
        BLAS threads of the eigendecompositions. Default: one below n = 1000, else the
        cores free on the machine that runs them, measured before each call
        (:func:`lswmkc_dask._threads.free_cores`). k-means always runs on one thread,
        so that labels do not depend on the thread count.
    stack_dtype : {"float64", "float32"}, default "float64"
        Precision of the kernel stack a fit from feature views builds on the GPU: float32 halves it, every product
        accumulated in float64 (a store's stack keeps the store's dtype, ``prepare(dtype=...)``).
    block_rows : int, optional
        Rows per solver block (default: one block per worker in whole store chunks,
        at most 256 MiB each; see :func:`lswmkc_dask.engine.runners.solver_block_rows`), and
        the chunking of the in-memory store made from array input.
    cache_kernels : bool or "auto", default "auto"
        Keep the kernel row blocks in worker memory for the whole fit (read once);
        False re-reads them from the store every iteration (out of core: for stacks
        larger than the workers' memory). "auto": cache while the stack is at most half
        of the workers' memory in all (:func:`plan_memory`).
    client : distributed.Client, str or Where, optional
        Run on this client or scheduler address, or where a :class:`lswmkc_dask.Where`
        says (a scheduler file, TLS settings, a LocalCluster of ``n_workers``
        processes), as :func:`lswmkc_dask.sweep` takes it; the estimator's
        ``n_workers`` and ``processes`` fill in a Where's that are None. Default: the
        active client, if any. A client object (also inside a Where) is not copied by
        :func:`sklearn.base.clone` (the clone shares it) and is not pickled (an
        unpickled model has ``client=None``).
    n_workers : int, optional
        Start a LocalCluster with this many worker processes for the fit (scripts then
        need an ``if __name__ == "__main__":`` guard).
    processes : bool, optional
        With no client: True, a LocalCluster of worker processes; False, a threaded
        LocalCluster in this process; None (default), in this process without Dask up
        to 1 GiB of kernels, a threaded LocalCluster above.
    verbose : int, default 0
        1: one line per iteration (iteration, objective, change of K*, seconds) on
        stderr.

    Attributes
    ----------
    labels_ : ndarray of shape (n,)
        Cluster of each sample (k-means on K*, lowest inertia of ``n_init`` starts).
    kernel_weights_ : ndarray of shape (m,)
        omega of the last iteration, unit 2-norm (Eq. 12).
    kernel_names_ : ndarray of str, shape (m,)
        The base kernel each weight belongs to (``"kernel p"`` by input position, or
        the store's names); with ``degenerate_kernels="drop"`` the dropped kernels
        are not among them.
    affinity_ : scipy.sparse.csr_matrix of shape (n, n)
        The consensus affinity graph Z (rows on the simplex, zero diagonal).
    kstar_factor_ : ndarray of shape (n, r)
        W with ``K* = W W^T`` (r positive eigenvalues).
    neighborhood_kernel_ : ndarray of shape (n, n)
        K*, formed from ``kstar_factor_`` when read.
    n_clusters_ : int
        k used: ``n_clusters``, or the number of distinct stored labels when it is None.
    embedding_ : ndarray of shape ``(n, n_clusters_)``
        Row-normalised top eigenvectors of the centred, normalised K*.
    gamma_ : ndarray of shape (n,)
        gamma_i of Eq. (27).
    objective_ : ndarray of shape ``(n_iter_,)``
        Eq. (10) after each iteration.
    kstar_change_ : ndarray of shape ``(n_iter_,)``
        ``||K*_t - K*_{t-1}||_F`` (NaN at t = 1).
    n_iter_ : int
    converged_ : bool
    n_features_in_ : int
        n, the number of samples (the width of a precomputed kernel).
    fit_seconds_ : float
        Wall seconds of the iterations (excludes start-up and k-means).
    iteration_seconds_ : ndarray of shape ``(n_iter_,)``
        Wall seconds of each iteration.
    eig_seconds_ : ndarray of shape ``(n_iter_,)``
        Seconds of the eigendecomposition within each iteration.
    eig_threads_ : ndarray of shape ``(n_iter_,)``
        BLAS threads it was given (``eig_threads``, or the cores free at that moment).
    eig_drivers_ : ndarray of str, shape ``(n_iter_,)``
        The eigen route of each iteration ("mrrr", "subset", "evd" or "lanczos"; with
        ``eig_driver="auto"`` the one its rule chose).
    eig_parts_ : list of dict, length ``n_iter_``
        Where each eigendecomposition spent its time: seconds (float) of each part of
        the "mrrr" route ("dense S", "reduction" (tridiagonal reduction), "tridiagonal
        eigenvectors", "back-transformation"; with ``eig_precision="float32"`` also
        "Gram", "projected S", "Ritz pairs", "Ritz vectors") and "columns" (int), the
        eigenvectors computed. "subset" and "evd" record only "dense S"; empty for
        "lanczos" and the device route. Not kept by :meth:`save`.
    kstar_rank_ : ndarray of shape ``(n_iter_,)``
        Number of positive eigenvalues of ``(Z + Z^T)/2`` per iteration.
    n_restarts_ : int
        Restarts from a checkpoint after a lost worker (0 for an undisturbed fit).
    execution_ : str
        Where the fit ran ("in-process (1 BLAS thread)", "Dask: 2 workers at ...").
    stage_seconds_ : dict of str to float
        Wall seconds of each stage of the fit: "start" (workers, memory plan, placing
        the row blocks), "initialise", "iterations", "cluster" (embedding and
        k-means), "gather" (Z to the client).
    result_ : LSWMKCResult
        The same fit as one dataclass (:class:`lswmkc_dask.records.LSWMKCResult`), what
        :func:`lswmkc_dask.lswmkc` returns; not restored by :meth:`load`.

    See Also
    --------
    lswmkc_dask.lswmkc : The same fit as a function, returning an ``LSWMKCResult``.
    lswmkc_dask.sweep : A grid of alphas (and k), chosen without labels.
    lswmkc_dask.selected_model : The estimator of a sweep's choice.
    lswmkc_dask.prepare : Base kernels into a chunked store on disk, for a cluster.

    Examples
    --------
    >>> from lswmkc_dask import LSWMKC
    >>> from lswmkc_dask.datasets import load_yale
    >>> kernels, labels = load_yale()
    >>> model = LSWMKC(n_clusters=15, alpha=8, n_init=10).fit(kernels)
    >>> model.n_iter_, model.kernel_weights_.round(3)
    (20, array([0.551, 0.258, 0.431, 0.457, 0.484]))
    >>> round(model.evaluate(labels)["ACC"], 2)
    0.64
    """

    #: The constraints of its parameters, from the parameter table (:mod:`lswmkc_dask._params`).
    _parameter_constraints = parameter_constraints("LSWMKC")

    def __init__(  # the defaults are the parameter table's (scikit-learn reads this signature)
        self,
        n_clusters=DEFAULTS["n_clusters"],
        *,
        alpha=DEFAULTS["alpha"],
        n_neighbors=DEFAULTS["n_neighbors"],
        gamma=DEFAULTS["gamma"],
        snapshot_iterations=DEFAULTS["snapshot_iterations"],
        kernel=DEFAULTS["kernel"],
        kernel_params=DEFAULTS["kernel_params"],
        max_iter=DEFAULTS["max_iter"],
        tol=DEFAULTS["tol"],
        min_iter=DEFAULTS["min_iter"],
        n_init=DEFAULTS["n_init"],
        random_state=DEFAULTS["random_state"],
        degenerate_kernels=DEFAULTS["degenerate_kernels"],
        eig_driver=DEFAULTS["eig_driver"],
        eig_precision=DEFAULTS["eig_precision"],
        eig_device=DEFAULTS["eig_device"],
        eig_threads=DEFAULTS["eig_threads"],
        stack_dtype=DEFAULTS["stack_dtype"],
        block_rows=DEFAULTS["block_rows"],
        cache_kernels=DEFAULTS["cache_kernels"],
        client=DEFAULTS["client"],
        n_workers=DEFAULTS["n_workers"],
        processes=DEFAULTS["processes"],
        verbose=DEFAULTS["verbose"],
    ):
        self.n_clusters = n_clusters
        self.alpha = alpha
        self.n_neighbors = n_neighbors
        self.gamma = gamma
        self.snapshot_iterations = snapshot_iterations
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.max_iter = max_iter
        self.tol = tol
        self.min_iter = min_iter
        self.n_init = n_init
        self.random_state = random_state
        self.degenerate_kernels = degenerate_kernels
        self.eig_driver = eig_driver
        self.eig_precision = eig_precision
        self.eig_device = eig_device
        self.eig_threads = eig_threads
        self.stack_dtype = stack_dtype
        self.block_rows = block_rows
        self.cache_kernels = cache_kernels
        self.client = client
        self.n_workers = n_workers
        self.processes = processes
        self.verbose = verbose

    # scikit-learn contract with a live client as a parameter: clone shares it (a client
    # cannot be deep-copied), pickling leaves it out.
    def __sklearn_clone__(self):
        client = self.client
        if _portable(client):
            return super().__sklearn_clone__()
        self.client = None
        try:
            new = super().__sklearn_clone__()
        finally:
            self.client = client
        new.client = client
        return new

    def __getstate__(self):
        state = super().__getstate__()
        if not _portable(state.get("client")):
            state = dict(state, client=None)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.transformer_tags = TransformerTags()  # transform: the embedding of new samples
        return tags

    def _progress(self, t, obj, change, seconds, restarted=None):
        """The fit's callback: each iteration's line on stderr while ``verbose`` (:meth:`Progress.iteration`)."""
        Progress(bool(self.verbose)).iteration(t, obj, change, seconds, restarted)

    def _validate_params(self):
        """The constructor's parameters validated (scikit-learn's hook); an error names its parameter."""
        check_params(type(self).__name__, self.get_params(deep=False), "LSWMKC")

    def fit(self, X, y=None):
        """Fit LSWMKC to base kernels or feature views.

        Parameters
        ----------
        X : array_like of shape (m, n, n), list of (n, n) arrays, KernelStore, str, or list of (n, d_v) arrays
            With ``kernel="precomputed"``: base kernels in memory, a kernel store (or
            its path), or a kernel file (``.mat``/``.npz``). Otherwise: m feature views
            (one kernel per view). Anything but a store is preprocessed first
            (docs/algorithm.md section 0).
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        InvalidParameter
            A parameter of the wrong type or out of range (a ``ValueError``), raised
            before any data is read or any cluster started.
        ValueError
            Also before any data is read: ``min_iter`` above ``max_iter``, ``gamma`` or
            ``alpha`` out of range (:func:`lswmkc_dask._validate.validate`). Once the
            input is open: hyper-parameters out of range for this n (n_clusters,
            n_neighbors); ``n_clusters=None`` with an input that holds no labels.
        KernelInputError, FileNotFoundError
            Unusable kernels (see :func:`lswmkc_dask.prepare`).
        ConnectionError
            ``client`` is an address that cannot be reached;
            :class:`lswmkc_dask.engine.cluster.SchedulerLostError` (a ConnectionError) when the
            connection to the scheduler is lost during the fit.
        MemoryError
            The gathered step (the dense S and the eigenvectors of K*) does not fit
            what is left under a worker's memory limit, or tasks killed their workers
            repeatedly; the message gives the figures and what to do.

        Warns
        -----
        DegenerateKernelWarning
            A numerically constant base kernel (see ``degenerate_kernels``).
        SnapshotWarning
            ``snapshot_iterations`` beyond the last iteration run (listed; nothing is
            kept for them).
        """
        params = self.get_params(deep=False)
        validate("LSWMKC", params, caller=type(self).__name__)
        check_precision(self.eig_precision, self.eig_device)  # "mixed" on the CPU: before reading X
        if self.n_clusters is None and not isinstance(X, (KernelStore, str, os.PathLike)):
            raise ParameterError(
                "{} is required: kernels or features given as arrays carry no labels to count the clusters from "
                "(pass {})", Param("n_clusters"), Param("n_clusters", Verbatim("k")),
            )
        source = feature_source(X, self.kernel, self.kernel_params)  # feature views: built on this GPU if it holds them
        resident = source is not None and features_resident(source, self._fit_options(self.n_clusters or 2),
                                                             self.client, self.stack_dtype)
        if isinstance(X, ResidentStack) or resident:  # the kernels on the device (the resident route)
            store = X if isinstance(X, ResidentStack) else features_stack(source, "cuda", self.stack_dtype)
        else:
            store = as_store(X if source is None else source, self.block_rows, self.degenerate_kernels)
        stats = store.preprocessing_statistics()  # damaged: refused before any work
        n_clusters = self.n_clusters
        if n_clusters is None:
            if store.labels is None:
                raise ParameterError("{} is required: {} holds no labels to count the clusters from (pass {})",
                                     Param("n_clusters"), X, Param("n_clusters", Verbatim("k")))
            n_clusters = count_classes(store.labels)
        n = store.n_samples
        validate("LSWMKC", dict(params, n_clusters=n_clusters), n)
        # Set only once the input is accepted: a refused refit leaves a fitted model as it was.
        self.n_clusters_ = n_clusters
        self.n_features_in_ = n
        result = run_fit(store, self._fit_options(), self.client, n_workers=self.n_workers, processes=self.processes,
                         block_rows=self.block_rows, cache_kernels=self.cache_kernels, callback=self._progress)
        self._set_result(result)
        for name, value in prediction_state(self, X, stats).items():  # what predict needs (PREDICT_STATE)
            setattr(self, name, value)
        missed = (snapshot_record(self) or {}).get("not_reached")
        if missed:
            warn_snapshots_not_reached(missed, "the fit", str(self.n_iter_), capped=not self.converged_)
        return self

    def _fit_options(self, n_clusters=None):
        """The parameters as one fit's :class:`~lswmkc_dask.records.FitOptions` (``eig_device`` as asked)."""
        return FitOptions(
            n_clusters=int(n_clusters if n_clusters is not None else self.n_clusters_),
            alpha=float(self.alpha),
            n_neighbors=int(self.n_neighbors),
            gamma=self.gamma,
            max_iter=self.max_iter,
            min_iter=self.min_iter,
            tol=self.tol,
            n_init=self.n_init,
            random_state=self.random_state,
            eig_driver=self.eig_driver,
            eig_precision=self.eig_precision,
            eig_device=self.eig_device,
            eig_threads=self.eig_threads,
            snapshot_iterations=tuple(int(t) for t in (self.snapshot_iterations or ())),
        )

    @classmethod
    def from_result(cls, result: LSWMKCResult, **params: Any) -> LSWMKC:
        """The fitted estimator of a fit made by :func:`lswmkc_dask.engine.fit.fit_store`,
        :func:`~lswmkc_dask.engine.fit.fit_blocks` or :func:`lswmkc_dask.engine.route.run_fit`.

        A sweep fits each grid point with those functions and writes its report
        (:func:`lswmkc_dask.report.record.fit_report`) from the estimator this returns: the
        same parameters and fitted attributes as ``LSWMKC(**params).fit(X)``.

        Parameters
        ----------
        result : LSWMKCResult
            One fit; ``n_clusters_`` is its ``n_clusters``.
        **params
            The parameters of :class:`LSWMKC` the fit was made with (not validated:
            they describe a fit already made).

        Returns
        -------
        LSWMKC
            Fitted: ``labels_``, ``kernel_weights_``, ... and ``result_``.
        """
        return cls(**params)._set_result(result)

    def _set_result(self, result):
        """The fitted attributes from an :class:`~lswmkc_dask.records.LSWMKCResult` (kept as ``result_``)."""
        self.result_ = result
        self.n_clusters_ = int(result.n_clusters)
        if result.kernel_names:
            self.kernel_names_ = np.asarray(result.kernel_names, dtype=object)
        if result.execution:
            self.execution_ = result.execution
        self.labels_, self.embedding_, self.kstar_factor_ = result.labels, result.embedding, result.kstar_factor
        self.affinity_ = result.affinity
        if self.snapshot_iterations is not None:
            self.snapshots_ = dict(result.snapshots or {})
        for name in ("kernel_weights", "gamma", "objective", "kstar_change", "n_iter", "converged", "fit_seconds",
                     "iteration_seconds", "eig_seconds", "eig_threads", "eig_drivers", "eig_parts", "n_restarts",
                     "kstar_rank"):
            setattr(self, name + "_", getattr(result, name))
        self.stage_seconds_ = dict(result.stage_seconds)
        return self

    def save(self, path, overwrite=False):
        """Write the fitted model to a portable, pickle-free safetensors file.

        The file holds the parameters (as JSON, without ``client``), the fitted arrays
        (``labels_``, ``kernel_weights_``, ``kernel_names_``, Z as CSR parts,
        ``kstar_factor_``, ``embedding_``, ``gamma_``, ``objective_``,
        ``kstar_change_``, ...), the format version and the package version
        (:mod:`lswmkc_dask.io.model_file`). It is written under a temporary name and
        renamed when complete; any safetensors reader reads it
        (``safetensors.numpy.load_file(path)``, its metadata with ``safe_open``).
        Reload it with :meth:`load`.

        Parameters
        ----------
        path : str or Path
            The file to write (the name is kept as given).
        overwrite : bool, default False
            Replace an existing ``path`` that is an lswmkc model file (never another
            file, a directory or a link).

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            The model is not fitted.
        FileExistsError
            ``path`` exists and ``overwrite`` is False, or it is not an lswmkc model
            file (a ``ForeignOutputError``).
        ProtectedOutputError
            ``path`` lies inside a kernel store (a ``ValueError``); nothing is written.
        TypeError
            A parameter that has no portable form (a ``RandomState`` instance as
            ``random_state``).
        """
        return save_model(self, path, overwrite=overwrite)

    @classmethod
    def load(cls, path):
        """A fitted model written by :meth:`save` or ``lswmkc fit --output DIR``.

        Read with ``numpy.load(allow_pickle=False)``: nothing is unpickled. The model
        has its parameters (``client=None``) and fitted attributes, so ``labels_``,
        ``kernel_weights_``, ``neighborhood_kernel_`` and :meth:`evaluate` (both
        protocols) work as after :meth:`fit`.

        Parameters
        ----------
        path : str or Path
            A model file, or a fit's output directory (``DIR/model.safetensors`` is read).

        Returns
        -------
        LSWMKC

        Raises
        ------
        FileNotFoundError
            ``path`` does not exist, or is a directory without ``model.safetensors``.
        lswmkc_dask.io.model_file.ModelVersionError
            The file was written in a newer format version than this package reads
            (a ``ValueError``; the message names the file, its version and the
            supported one).
        lswmkc_dask.io.model_file.ModelFileError
            ``path`` is not an lswmkc model file (or not a regular file), is one of
            the zip (``.npz``) format of earlier versions (fit again and save), or is
            damaged or made up: a member of the wrong dtype, shape or size, not
            finite, out of range, found twice, or at odds with another member or
            with what :meth:`fit` accepts (a ``ValueError`` naming the file and the
            member, raised before anything the file cannot back is allocated).
        """
        return load_model(path, cls)

    def transform(self, X, diagonals=None):
        """The embedding of new samples: their affinity rows times ``embedding_`` (docs/algorithm.md section 8).

        Parameters
        ----------
        X : list of ndarray of shape (n_new, d_v), or array_like of shape (m, n_new, n)
            Feature views as :meth:`fit` took them, or, for precomputed kernels, the raw
            cross-kernels ``k_p(x, X_train)`` of every input kernel.
        diagonals : array_like of shape (m, n_new), optional
            ``k_p(x, x)``; required with cross-kernels (except one kernel with
            ``gamma="auto"``, where they do not change the result: X of shape
            (n_new, n), scikit-learn's convention), refused with features.

        Returns
        -------
        ndarray of shape ``(n_new, n_clusters_)``
            Rows of unit length (zero rows stay zero), as ``embedding_``.

        Raises
        ------
        ValueError, KernelInputError, sklearn.exceptions.NotFittedError
            :func:`lswmkc_dask.predict.transform_samples`.
        """
        return transform_samples(self, X, diagonals)

    def predict(self, X, diagonals=None):
        """The cluster of each new sample: the label of largest affinity-weighted vote of ``labels_``.

        Parameters
        ----------
        X, diagonals
            As :meth:`transform`.

        Returns
        -------
        ndarray of shape (n_new,)
            Labels in the numbering of ``labels_``.

        Raises
        ------
        ValueError, KernelInputError, sklearn.exceptions.NotFittedError
            :func:`lswmkc_dask.predict.predict_labels`.
        """
        return predict_labels(self, X, diagonals)

    @property
    def neighborhood_kernel_(self):
        """K* of shape (n, n), formed as ``W W^T`` from ``kstar_factor_`` (Theorem 2)."""
        if not hasattr(self, "kstar_factor_"):
            raise AttributeError("neighborhood_kernel_ is available after fit")
        return self.kstar_factor_ @ self.kstar_factor_.T

    def evaluate(self, labels_true, protocol="honest"):
        """ACC, NMI, Purity and ARI of the fitted clustering.

        Parameters
        ----------
        labels_true : array_like of shape (n,)
        protocol : {"honest", "paper"}
            ``"honest"``: the metrics of ``labels_``. ``"paper"``: the reference
            protocol, each metric the maximum over ``n_init`` single-start k-means
            runs on ``embedding_`` (docs/algorithm.md section 3).

        Returns
        -------
        dict
            ``{"ACC", "NMI", "Purity", "ARI", "NMI_arithmetic"}`` -> float. ``NMI`` is
            normalised by the larger entropy (the authors' code; scikit-learn's
            ``average_method="max"``), ``NMI_arithmetic`` by the mean of the two
            (scikit-learn's default): :func:`lswmkc_dask.report.metrics.evaluate`.

        Raises
        ------
        ValueError
            Unknown protocol, or labels of another length.
        """
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        if not hasattr(self, "labels_"):
            raise AttributeError("call fit before evaluate")
        if protocol == "honest":
            return evaluate(labels_true, self.labels_)
        return evaluate_embedding(
            self.embedding_, labels_true, self.n_clusters_, "paper", n_init=self.n_init, random_state=self.random_state
        )


def lswmkc(X: Any, n_clusters: int | None = None, **params: Any) -> LSWMKCResult:
    """Fit LSWMKC once and return the result: the function form of :class:`LSWMKC`.

    ``lswmkc(X, k, alpha=a, ...)`` is ``LSWMKC(k, alpha=a, ...).fit(X).result_``: the
    same validation, the same execution (this process, the active client, or
    ``client=``), the same numbers.

    Parameters
    ----------
    X : array_like of shape (m, n, n), KernelStore, str, or list of (n, d_v) arrays
        Base kernels (or feature views with ``kernel=``), as for :meth:`LSWMKC.fit`.
    n_clusters : int, optional
        k; None counts the classes of the labels stored with the kernels.
    **params
        Any parameter of :class:`LSWMKC` (``alpha``, ``n_neighbors``, ``gamma``, ...).

    Returns
    -------
    LSWMKCResult
        Labels of shape (n,), the affinity graph Z (CSR, n x n, Theorem 1), the factor
        W of K* = W W^T (n x r, Theorem 2), the kernel weights (m,) of Eq. (12), the
        objective of Eq. (10) per iteration, and where it ran.

    Raises
    ------
    ValueError, KernelInputError, MemoryError, ConnectionError
        As :meth:`LSWMKC.fit`.
    """
    return LSWMKC(n_clusters, **params).fit(X).result_
