"""LSWMKC as a scikit-learn style estimator running on Dask."""

from __future__ import annotations

from typing import Any

import os

from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import TransformerTags

from .engine.where import Where
from ._validate import check_params, validate
from .errors import Param, ParameterError, Verbatim
from .io import count_classes
from .io.inputs import is_stack, is_store
from .report.metrics import PROTOCOLS, evaluate, evaluate_embedding
from .records import FitOptions, LSWMKCResult
from .engine.route import check_precision, open_kernels, run_fit
from ._params import DEFAULTS, parameter_constraints
from .engine.progress import Progress
from .io.model_file import load_model, save_model
from .predict import predict_labels, prediction_state, transform_samples
from .report.record import snapshot_record, warn_snapshots_not_reached


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

    It runs on ``client`` if given, else on the active Dask client, else in this
    process (no ``__main__`` guard needed), or on a LocalCluster of ``n_workers``
    processes when asked (:func:`lswmkc_dask.engine.cluster.execution`).

    Parameters
    ----------
    n_clusters : int or None, default None
        k, number of clusters, ``2 <= k < n``. None: the number of distinct labels
        stored with the kernels (``.mat``, ``.npz`` or store); required without them.
    alpha : float, default 1.0
        Balance hyper-parameter of the neighbourhood-kernel term (Eq. 10), in
        ``[0, 1e300]`` (:data:`lswmkc_dask.core.equations.ALPHA_MAX`: beyond, Z's update overflows).
    n_neighbors : int, default 5
        c, neighbours per sample in the initial graph (Eq. 28), ``1 <= c <= n - 2``.
    gamma : "auto" or float, default "auto"
        "auto": the learned per-sample gamma_i of Eqs. (25)-(27), the method's own. A
        float in ``[1e-12, 1e300]`` (:data:`lswmkc_dask.core.GAMMA_MIN`,
        :data:`~lswmkc_dask.core.equations.GAMMA_MAX`): one gamma for every sample in
        the updates of Z and the objective (the paper's gamma ablation; Z0 stays the
        learned one, :func:`lswmkc_dask.engine.solver.with_gamma`).
    snapshot_iterations : sequence of int, optional
        Iterations (0 = the initialisation) whose Z_t and factor W_t of K*_t are kept
        in ``snapshots_``; those beyond the last iteration run are listed in a
        :class:`~lswmkc_dask.errors.SnapshotWarning`.
    kernel : {"precomputed", "rbf", "linear", "poly"}, default "precomputed"
        "precomputed": ``fit(X)`` takes base kernels. Otherwise m feature views of
        shape (n, d_v), one kernel built per view: "rbf" ``exp(-D2 / mean(D2))`` on
        z-scored features, "linear" ``X X^T``, "poly" ``(X X^T / d + coef0)^degree``;
        aliases "gaussian" and "polynomial". A fit on a store that :func:`lswmkc_dask.prepare`
        made from feature views sets ``kernel`` and ``kernel_params`` to the store's (the
        model predicts from views); fitted again, it takes that store with that kernel.
    kernel_params : dict, optional
        For "poly": ``degree`` (default 2), ``coef0`` (default 1.0).
    max_iter : int, default 100
        Iteration cap (the reference code stops at 101).
    tol : float, default 1e-3
        Stop when ``|f_t - f_{t-1}| / ||K*_t||_F < tol`` with
        ``f_t = ||K*_t - K*_{t-1}||_F``, once ``t >= min_iter``.
    min_iter : int, default 20
        The stop rule is not tested earlier (reference: 20); at most ``max_iter``
        (:func:`check_iterations`), the default excepted.
    n_init : int, default 50
        k-means starts for ``labels_`` (lowest inertia kept) and runs of the paper
        protocol in :meth:`evaluate`; at most 10,000.
    random_state : int or None, default 0
        Seed of the k-means starts.
    degenerate_kernels : {"warn", "drop", "error"}, default "warn"
        A numerically constant base kernel: kept with a warning (as the reference),
        dropped, or refused (:func:`lswmkc_dask.prepare`).
    eig_driver : {"auto", "mrrr", "subset", "evd", "lanczos"}, default "auto"
        LAPACK route for the positive eigenpairs of ``(Z + Z^T)/2``
        (:func:`lswmkc_dask.core.eigen.psd_factor`): "mrrr" (``dstemr``, least
        memory), "subset" (``subset_by_value``), "evd" (divide and conquer) or
        "lanczos" (ARPACK on the sparse S, for a small positive part). "auto" chooses
        each iteration from the previous rank of K* and the memory left
        (docs/performance.md#the-auto-rule); ``eig_drivers_`` records it. All routes agree to 1e-10.
    eig_precision : {"float64", "float32", "mixed"}, default "float64"
        Precision of the eigendecomposition of S. "float64" reproduces the reference;
        "float32": dense eigendecomposition in float32 refined in float64 by
        Rayleigh-Ritz (``eig_drivers_`` "float32-rr"); "mixed": the resident route only
        (a GPU), polynomial iterations first (float16 on the tensor cores from
        n = 1000, float32 below), float64 deciding the stop rule and the final K*;
        refused on the CPU routes before any work.
    eig_device : {"cpu", "cuda", "auto"}, default "cpu"
        Where the fit runs. "cuda": a GPU through CuPy; the whole iteration stays on
        the device where it holds the kernel stack (about ``(m + 6) n^2 x 8`` bytes,
        :mod:`lswmkc_dask.engine.device_fit`; on a cluster, a worker with
        ``resources={"GPU": 1}``), else only the gathered eigendecomposition goes
        there (a ``DeviceFallbackWarning``). No device:
        :class:`lswmkc_dask.engine.gpu.DeviceUnavailableError` before any data is read.
        "auto": the GPU from n = 1000 when there is one.
    eig_threads : int, optional
        BLAS threads of the eigendecompositions. Default: one below n = 1000, else the
        cores free when each runs (:func:`lswmkc_dask._threads.free_cores`).
    stack_dtype : {"float64", "float32"}, default "float64"
        Precision of the kernel stack a fit from feature views builds on the GPU:
        float32 halves it, every product accumulated in float64.
    block_rows : int, optional
        Rows per solver block (default: :func:`lswmkc_dask.engine.runners.solver_block_rows`),
        and the row blocks of the kernels preprocessed in memory from array input.
    cache_kernels : bool or "auto", default "auto"
        Keep the kernel row blocks in worker memory (read once); False re-reads them
        every iteration (out of core). "auto": while they fill at most half of it.
    client : distributed.Client, str or Where, optional
        Run on this client, scheduler address or :class:`lswmkc_dask.Where`
        (``n_workers`` and ``processes`` fill in a Where's that are None). Default: the
        active client, if any. A live client is shared by :func:`sklearn.base.clone`
        and not pickled.
    n_workers : int, optional
        Start a LocalCluster of this many worker processes for the fit.
    processes : bool, optional
        With no client: True, worker processes; False, a threaded LocalCluster; None,
        in this process up to 1 GiB of kernels, a threaded LocalCluster above.
    verbose : int, default 0
        1: one line per iteration (iteration, objective, change of K*, seconds) on stderr.

    Attributes
    ----------
    labels_ : ndarray of shape (n,)
        Cluster of each sample (k-means on K*, lowest inertia of ``n_init`` starts).
    kernel_weights_ : ndarray of shape (m,)
        omega of the last iteration, unit 2-norm (Eq. 12).
    kernel_names_ : ndarray of str, shape (m,)
        The base kernel of each weight (dropped kernels left out).
    affinity_ : scipy.sparse.csr_matrix of shape (n, n)
        The consensus affinity graph Z (rows on the simplex, zero diagonal).
    kstar_factor_ : ndarray of shape (n, r)
        W with ``K* = W W^T`` (r positive eigenvalues).
    neighborhood_kernel_ : ndarray of shape (n, n)
        K*, formed from ``kstar_factor_`` when read.
    n_clusters_ : int
        k used.
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
    iteration_seconds_, eig_seconds_ : ndarray of shape ``(n_iter_,)``
        Wall seconds of each iteration and of its eigendecomposition.
    eig_threads_ : ndarray of shape ``(n_iter_,)``
        BLAS threads each eigendecomposition was given.
    eig_drivers_ : ndarray of str, shape ``(n_iter_,)``
        The eigen route of each iteration.
    eig_parts_ : list of dict, length ``n_iter_``
        Seconds of each part of each eigendecomposition and "columns", the
        eigenvectors computed (empty for "lanczos" and the device route); not saved.
    kstar_rank_ : ndarray of shape ``(n_iter_,)``
        Number of positive eigenvalues of ``(Z + Z^T)/2`` per iteration.
    n_restarts_ : int
        Restarts from a checkpoint after a lost worker.
    execution_ : str
        Where the fit ran ("in-process (1 BLAS thread)", "Dask: 2 workers at ...").
    stage_seconds_ : dict of str to float
        Wall seconds of each stage: "start", "initialise", "iterations", "cluster",
        "gather".
    view_names_, view_columns_ : list
        Fitted on feature views: each view's name (``""`` unknown; ``lswmkc fit
        --features`` names it by its file) and column names (a DataFrame's, ``[]``
        unknown), checked by :meth:`predict` (:mod:`lswmkc_dask.predict`).
    result_ : LSWMKCResult
        The same fit as one record (:class:`lswmkc_dask.records.LSWMKCResult`); not
        restored by :meth:`load`.

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
            its path), or a kernel file (``.mat``/``.npz``); otherwise m feature views.
            Anything but a store is preprocessed first (docs/algorithm.md section 0).
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        InvalidParameter
            A parameter of the wrong type or out of range (a ``ValueError``), before
            any data is read or any cluster started.
        ValueError
            Before any data is read: ``min_iter`` above ``max_iter``, ``gamma`` or
            ``alpha`` out of range. Once the input is open: n_clusters or n_neighbors
            out of range for n; ``n_clusters=None`` with an input that holds no labels.
        KernelInputError, FileNotFoundError
            Unusable kernels (see :func:`lswmkc_dask.prepare`).
        ConnectionError
            ``client`` cannot be reached, or the scheduler is lost during the fit
            (:class:`lswmkc_dask.engine.cluster.SchedulerLostError`).
        MemoryError
            The gathered step does not fit a worker's memory, or tasks killed their
            workers repeatedly; the message gives the figures.

        Warns
        -----
        DegenerateKernelWarning
            A numerically constant base kernel (see ``degenerate_kernels``).
        SnapshotWarning
            ``snapshot_iterations`` beyond the last iteration run.
        """
        params = self.get_params(deep=False)
        validate("LSWMKC", params, caller=type(self).__name__)
        check_precision(self.eig_precision, self.eig_device)  # "mixed" on the CPU: before reading X
        if self.n_clusters is None and not (is_stack(X) or isinstance(X, (str, os.PathLike))):
            raise ParameterError(
                "{} is required: kernels or features given as arrays carry no labels to count the clusters from "
                "(pass {})", Param("n_clusters"), Param("n_clusters", Verbatim("k")),
            )
        # views: their kernels built on this GPU where the whole fit runs there
        store = open_kernels(X, kernel=self.kernel, kernel_params=self.kernel_params, block_rows=self.block_rows,
                             degenerate_kernels=self.degenerate_kernels, options=self._fit_options(self.n_clusters or 2),
                             client=self.client, stack_dtype=self.stack_dtype)
        stats = store.preprocessing_statistics()  # damaged: refused before any work
        # a store prepared from feature views: the model predicts from views, as one fitted on them
        features = store.feature_views() if is_store(X) and hasattr(store, "feature_views") else None
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
        if features is not None:  # a store of feature views: the model predicts from views, as one fitted on them
            self.kernel, self.kernel_params = features.kernel, features.kernel_params
        for name, value in prediction_state(self, X, stats, features).items():  # what predict needs (PREDICT_STATE)
            setattr(self, name, value)
        missed = (snapshot_record(self.snapshot_iterations, result.snapshots) or {}).get("not_reached")
        if missed:
            warn_snapshots_not_reached(missed, "the fit", str(self.n_iter_), capped=not self.converged_)
        return self

    def _fit_options(self, n_clusters=None):
        """The parameters as one fit's :class:`~lswmkc_dask.records.FitOptions` (``eig_device`` as asked)."""
        same = ("gamma", "max_iter", "min_iter", "tol", "n_init", "random_state", "eig_driver", "eig_precision",
                "eig_device", "eig_threads")
        return FitOptions(
            n_clusters=int(n_clusters if n_clusters is not None else self.n_clusters_),
            alpha=float(self.alpha),
            n_neighbors=int(self.n_neighbors),
            snapshot_iterations=tuple(int(t) for t in (self.snapshot_iterations or ())),
            **{name: getattr(self, name) for name in same},
        )

    @classmethod
    def from_result(cls, result: LSWMKCResult, **params: Any) -> LSWMKC:
        """The fitted estimator of a fit made by :func:`lswmkc_dask.engine.route.run_fit`
        (or :func:`~lswmkc_dask.engine.fit.fit_store`, :func:`~lswmkc_dask.engine.fit.fit_blocks`):
        the model of a sweep's run (its file is written from the record, as :meth:`save` writes it).

        Parameters
        ----------
        result : LSWMKCResult
            One fit; ``n_clusters_`` is its ``n_clusters``.
        **params
            The parameters of :class:`LSWMKC` the fit was made with (not validated).

        Returns
        -------
        LSWMKC
            Fitted: ``labels_``, ``kernel_weights_``, ... and ``result_``.
        """
        return cls(**params)._set_result(result)

    def _set_result(self, result):
        """The fitted attributes from an :class:`~lswmkc_dask.records.LSWMKCResult` (kept as ``result_``)."""
        self.__dict__.update(result.fitted_attributes(self.snapshot_iterations), result_=result)
        return self

    def save(self, path, overwrite=False):
        """Write the fitted model to a portable, pickle-free safetensors file.

        The parameters (JSON, without ``client``), the fitted arrays and the format
        version (:mod:`lswmkc_dask.io.model_file`), written under a temporary name and
        renamed when complete; :meth:`load` reads it back.

        Parameters
        ----------
        path : str or Path
            The file to write.
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
            ``path`` exists and ``overwrite`` is False, or it is a directory, a link or
            a special file (a ``ForeignOutputError``).
        ProtectedOutputError
            ``path`` lies inside a kernel store (a ``ValueError``).
        TypeError
            A parameter with no portable form (a ``RandomState`` as ``random_state``).
        """
        return save_model(vars(self), self.get_params(deep=False), path, overwrite=overwrite)

    @classmethod
    def load(cls, path):
        """A fitted model written by :meth:`save` or ``lswmkc fit --output DIR``.

        Nothing is unpickled; the model has its parameters (``client=None``) and fitted
        attributes, :meth:`evaluate` works as after :meth:`fit`.

        Parameters
        ----------
        path : str or Path
            A model file, or a fit's or sweep run's directory (``DIR/model.safetensors``;
            a sweep run's model is its fit's, at the first k of a k grid).

        Returns
        -------
        LSWMKC

        Raises
        ------
        FileNotFoundError
            ``path`` does not exist, or is a directory without ``model.safetensors``.
        lswmkc_dask.io.model_file.ModelVersionError
            A newer format version than this package reads (a ``ValueError``).
        lswmkc_dask.io.model_file.ModelFileError
            Not an lswmkc model file (an ``.npz`` archive, a pickle), or damaged
            (a ``ValueError`` naming the file and the member;
            :func:`lswmkc_dask.io.model_file.load_model`).
        """
        return load_model(path, cls)

    def transform(self, X, diagonals=None, *, view_names=None):
        """The embedding of new samples: their affinity rows times ``embedding_`` (docs/algorithm.md section 8).

        Parameters
        ----------
        X : list of ndarray of shape (n_new, d_v), or array_like of shape (m, n_new, n)
            Feature views as :meth:`fit` took them, or the raw cross-kernels
            ``k_p(x, X_train)`` of every input kernel.
        diagonals : array_like of shape (m, n_new), optional
            ``k_p(x, x)``; required with cross-kernels but for one kernel with
            ``gamma="auto"`` (X of shape (n_new, n)), refused with features.
        view_names : sequence of str, optional
            One name per feature view; a name of another fitted view (``view_names_``)
            is refused (``lswmkc predict`` names each view by its file, as ``fit``).

        Returns
        -------
        ndarray of shape ``(n_new, n_clusters_)``
            Rows of unit length (zero rows stay zero), as ``embedding_``.

        Raises
        ------
        ValueError, KernelInputError, sklearn.exceptions.NotFittedError
            :func:`lswmkc_dask.predict.transform_samples`; views whose names or column
            names are other fitted views' or columns (``ViewMismatchError``).
        lswmkc_dask.predict.WorkersLostError
            On Dask workers: they kept dying after the fitted state was sent again
            :data:`lswmkc_dask.predict.MAX_RESENDS` times.

        Warns
        -----
        lswmkc_dask.predict.ViewOrderWarning
            Unnamed views whose feature statistics look like the fitted ones in another order.
        """
        return transform_samples(self, X, diagonals, view_names=view_names)

    def predict(self, X, diagonals=None, *, view_names=None):
        """The cluster of each new sample: the label of largest affinity-weighted vote of ``labels_``.

        Parameters
        ----------
        X, diagonals, view_names
            As :meth:`transform`.

        Returns
        -------
        ndarray of shape (n_new,)
            Labels in the numbering of ``labels_``.

        Raises
        ------
        ValueError, KernelInputError, sklearn.exceptions.NotFittedError
            :func:`lswmkc_dask.predict.predict_labels` (as :meth:`transform`).
        lswmkc_dask.predict.WorkersLostError
            On Dask workers: they kept dying after the fitted state was sent again
            :data:`lswmkc_dask.predict.MAX_RESENDS` times.

        Warns
        -----
        lswmkc_dask.predict.ViewOrderWarning
            As :meth:`transform`.
        """
        return predict_labels(self, X, diagonals, view_names=view_names)

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
            ``{"ACC", "NMI", "Purity", "ARI", "NMI_arithmetic"}`` -> float
            (:func:`lswmkc_dask.report.metrics.evaluate`).

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
    """Fit LSWMKC once and return the result: ``LSWMKC(n_clusters, **params).fit(X).result_``.

    Parameters
    ----------
    X : array_like of shape (m, n, n), KernelStore, str, or list of (n, d_v) arrays
        As for :meth:`LSWMKC.fit`.
    n_clusters : int, optional
        k; None counts the classes of the labels stored with the kernels.
    **params
        Any parameter of :class:`LSWMKC`.

    Returns
    -------
    LSWMKCResult
        Labels (n,), Z (CSR, Theorem 1), the factor W of K* = W W^T (Theorem 2), the
        kernel weights (m,) of Eq. (12), the objective of Eq. (10) per iteration.

    Raises
    ------
    ValueError, KernelInputError, MemoryError, ConnectionError
        As :meth:`LSWMKC.fit`.
    """
    return LSWMKC(n_clusters, **params).fit(X).result_
