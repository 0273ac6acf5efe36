"""The parameters of LSWMKC, declared once.

Each :class:`Row` gives a parameter's name, default, constraint (:mod:`lswmkc_dask._constraints`),
doc, command-line flag and where it applies. From the table come the estimator's constraints
and defaults (:func:`parameter_constraints`, :data:`DEFAULTS`, checked by
:mod:`lswmkc_dask._validate`), the defaults of ``FitOptions``, ``sweep`` and ``compare``,
each command's options with their help and argparse checks (:func:`add_arguments`), and
docs/parameters.md (:func:`markdown_table`: ``python -m lswmkc_dask._params > docs/parameters.md``).
"""

from __future__ import annotations

import argparse
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._constraints import Constraint, HasMethods, Interval, Options, Types
from .core.eigen import EIG_DEVICES, EIG_ROUTES, FIT_PRECISIONS
from .kernels.features import DEGENERATE_POLICIES, KERNEL_ALIASES, KERNEL_KINDS

#: The Python entry points a row may apply to.
ENTRY_POINTS = ("LSWMKC", "FitOptions", "sweep", "compare")
#: The commands a row may give a flag to.
COMMANDS = ("prepare", "fit", "sweep", "compare", "predict")
#: The number of iterations before the stop rule is first tested (the reference code's).
MIN_ITER = 20
#: The most k-means starts (``n_init``): 200 times the default 50; a larger count (a
#: mistyped 1000000000) would run for days rather than be refused.
N_INIT_MAX = 10_000
#: ``kernel=`` values: precomputed base kernels, or one kernel per feature view.
KERNELS = ("precomputed", *KERNEL_KINDS)
#: The methods of :func:`lswmkc_dask.grid.compare.compare` in the order of the LSWMKC paper's
#: Table I (the KNN-localised average kernel of its Table III before LSWMKC); "all" names them all.
METHODS = ("avg-kkm", "mkkm", "lmkkm", "mkkm-mr", "lkam", "onkc", "swmc", "lf-mvc", "spmkc", "smkkm", "cagl",
           "oplfmvc", "lsmkkm", "knn", "lswmkc")
#: The methods a comparison runs by default: the uniform and MKKM baselines, KNN and LSWMKC.
DEFAULT_METHODS = ("avg-kkm", "mkkm", "knn", "lswmkc")
#: The KNN mechanism's neighbour ratios tau (the paper's grid; :data:`lswmkc_dask.grid.baselines.DEFAULT_TAUS` is this).
TAUS = tuple(round(0.1 * i, 1) for i in range(1, 10))
#: Where a row's flag goes in a command's options, in this order (:func:`add_arguments`).
SECTIONS = ("input", "methods", "run", "output", "where")


# --- constraints (lswmkc_dask._constraints) -----------------------------------------


def _ints(lo: int, hi: int | None = None) -> Interval:
    return Interval(numbers.Integral, lo, hi)


_NON_NEGATIVE = Interval(numbers.Real, 0)
_BOOLEAN = Types(bool, np.bool_)


def _where_type() -> type:
    from .engine.where import Where  # when checked: the command line's start-up loads no Dask or zarr

    return Where


#: None, an address, a Where or a Dask client (duck-typed).
_CLIENT = (None, Types(str), Types(_where_type), HasMethods("submit", "gather", "scheduler_info"))


# --- argparse types beyond a constraint's: every value checked before any data is read ----


def alpha_value(text: str) -> float:
    """Argparse type: alpha, a number in ``[0, ALPHA_MAX]`` (:data:`lswmkc_dask.core.equations.ALPHA_MAX`).

    Raises
    ------
    argparse.ArgumentTypeError
        Out of range (the message says why the bound).
    """
    from .core.equations import ALPHA_MAX, ALPHA_RANGE_WHY  # the command line's start-up loads no SciPy solver

    value = _NON_NEGATIVE.parse()(text)
    if value > ALPHA_MAX:
        raise argparse.ArgumentTypeError(f"must be a number in [0, {ALPHA_MAX:g}], got {text}{ALPHA_RANGE_WHY}")
    return value


def gamma_value(text: str) -> str | float:
    """Argparse type: ``"auto"`` or a number in ``[GAMMA_MIN, GAMMA_MAX]`` (:func:`lswmkc_dask.core.check_gamma`).

    Raises
    ------
    argparse.ArgumentTypeError
        Neither "auto" nor a number in range.
    """
    from .core.equations import check_gamma  # the command line's start-up loads no solver

    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number, got {text!r}") from None
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be 'auto' or a finite number > 0, got {text}")
    try:
        return check_gamma(value)
    except ValueError as exc:  # the range, and why
        raise argparse.ArgumentTypeError(str(exc).replace("gamma must be", "must be", 1)) from None


@dataclass(frozen=True)
class Grid:
    """The command-line grid form of a parameter (``sweep``, ``compare``).

    Attributes
    ----------
    flag : str
        E.g. ``"--alphas"``.
    commands : tuple of str
        The commands that take the grid instead of the single value.
    python : str
        Its keyword in :func:`lswmkc_dask.sweep` / :func:`lswmkc_dask.grid.compare.compare`.
    default : tuple or None
        The grid's default (None: the Python function's).
    help : str
    """

    flag: str
    commands: tuple[str, ...]
    python: str
    default: tuple | None
    help: str


@dataclass(frozen=True)
class Row:
    """One parameter: its name, default, constraint, doc, flag and where it applies.

    Attributes
    ----------
    name : str
        The Python keyword.
    default : object
        The default everywhere it applies (``cli_default``: the command line's, where it differs).
    constraint : tuple of Constraint or None
        The alternatives a value must satisfy one of (``None``: the value None); empty:
        checked by its own function. Its Interval gives the flag's argparse type, its
        Options the flag's choices, unless ``type`` or ``choices`` are given.
    doc : str
        One line: what it does, its unit or range.
    python, commands : tuple of str
        The entry points (:data:`ENTRY_POINTS`) and the commands (:data:`COMMANDS`) that take it.
    flag : str or None
        The long option (None: none; ``cli_note`` says what the command line does).
    aliases : tuple of str
        Other spellings of the flag.
    type, choices, nargs, metavar, action, const
        As ``argparse.ArgumentParser.add_argument``; ``action="store_const"`` makes a
        switch setting the parameter to ``const`` (``--quiet``: ``verbose=0``).
    help : str or mapping of str to str
        The flag's help (a mapping: per command, key ``""`` the others); the default is
        added where the text does not state it.
    cli_default : object
    cli_note : str
        How the command line maps to it, where not plainly its flag.
    grid : Grid or None
        Its grid form in ``sweep``/``compare``.
    section : str
        Where its flag goes among a command's options (:data:`SECTIONS`).
    target : tuple of str
        For a flag that no entry point of ``python`` takes: ``("module:callable", keyword)``
        of what it sets; its default is the row's.
    """

    name: str
    default: Any
    constraint: tuple[Constraint | None, ...]
    doc: str
    python: tuple[str, ...] = ("LSWMKC",)
    commands: tuple[str, ...] = ()
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    type: Callable[[str], Any] | None = None
    choices: tuple | None = None
    nargs: str | None = None
    metavar: str | None = None
    action: str | None = None
    help: str | Mapping[str, str] = ""
    cli_default: Any = field(default=..., repr=False)
    cli_note: str = ""
    grid: Grid | None = None
    const: Any = None
    section: str = "run"
    target: tuple[str, ...] = ()

    @property
    def arg_type(self) -> Callable[[str], Any] | None:
        """The flag's argparse type: ``type``, else the constraint's interval's."""
        if self.type is not None:
            return self.type
        return next((c.parse() for c in self.constraint if isinstance(c, Interval)), None)

    @property
    def arg_choices(self) -> tuple | None:
        """The flag's choices: ``choices``, else the constraint's options."""
        if self.choices is not None:
            return self.choices
        return next((c.values for c in self.constraint if isinstance(c, Options)), None)

    @property
    def command_default(self) -> Any:
        """The default of its flag (``cli_default`` where given, else ``default``)."""
        return self.default if self.cli_default is ... else self.cli_default

    def help_for(self, command: str) -> str:
        """The help text of its flag in ``command``, naming the default."""
        text = self.help if isinstance(self.help, str) else self.help.get(command, self.help.get("", ""))
        text = text or self.doc
        if "default" not in text and self.command_default is not None and self.action is None:
            text += f" (default {_shown(self.command_default)})"
        return text


def _shown(value: Any) -> str:
    """A default as the help and the docs show it: ``1e-3`` as 0.001, 1.0 as 1."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return " ".join(_shown(v) for v in value)
    return str(value)


_FIT = ("LSWMKC", "FitOptions", "sweep", "compare")
_GRIDS = ("LSWMKC", "FitOptions")  # a grid of values in sweep/compare (Grid)
_RUNS = ("fit", "sweep", "compare")
_ALL = ("prepare", "fit", "sweep", "compare")
_READ_FEATURES = (*_ALL, "predict")  # how --features files are read: predict reads them as the fit did
_CONNECTS = (*_RUNS, "predict")  # an existing scheduler: predict sends its blocks to its workers too

ROWS: tuple[Row, ...] = (
    Row("n_clusters", None, (_ints(2), None),
        "k, the number of clusters, 2 <= k < n; None: the number of distinct stored labels",
        python=_FIT, commands=_RUNS, flag="--n-clusters", metavar="K",
        help={"": "number of clusters k (default: number of distinct labels)",
              "sweep": "number of clusters k, or a k grid (`--n-clusters 2 3 4 5`: one fit per alpha, clustered "
                       "at every k; the label-free choice covers k); default: the number of distinct labels, "
                       "or the grid 2..12 when there are no labels"},
        grid=Grid("--n-clusters", ("sweep",), "n_clusters", None, "")),
    Row("alpha", 1.0, (_NON_NEGATIVE,),
        "balance hyper-parameter of the neighbourhood-kernel term (Eq. 10), in [0, 1e300]",
        python=_GRIDS, commands=("fit",), flag="--alpha", type=alpha_value,
        help="balance hyper-parameter alpha in [0, 1e300] (default 1)",
        grid=Grid("--alphas", ("sweep", "compare"), "alphas", None,
                  "alpha grid, values in [0, 1e300] (default 2^0 .. 2^10)")),
    Row("n_neighbors", 5, (_ints(1),),
        "c, neighbours per sample in the initial graph (Eq. 28), 1 <= c <= n - 2",
        python=_GRIDS, commands=("fit",), flag="--n-neighbors", metavar="C",
        help="neighbours c of each sample in the initial graph (default 5)",
        grid=Grid("--n-neighbors", ("sweep", "compare"), "n_neighbors", (5,),
                  "grid of neighbours c of the initial graph (default 5)")),
    Row("gamma", "auto", (),
        "'auto': the learned per-sample gamma_i (Eqs. 25-27); a float in [1e-12, 1e300]: one gamma for every sample",
        python=_GRIDS, commands=("fit",), flag="--gamma", type=gamma_value,
        help="'auto' (the learned per-sample gamma of the method, default) or one gamma > 0 for every sample",
        grid=Grid("--gammas", ("sweep",), "gammas", ("auto",),
                  "gamma grid: 'auto' (the learned per-sample gamma, default) and/or numbers > 0, one gamma "
                  "for every sample (the paper's gamma ablation, e.g. auto 0.03125 0.125 0.5 2 8 32)")),
    Row("snapshot_iterations", None, (),
        "iterations (0 = the initialisation) whose Z_t and factor of K*_t are kept (the paper's evolution figures)",
        python=("LSWMKC", "FitOptions", "sweep"), commands=("fit", "sweep"), flag="--snapshots",
        aliases=("--snapshot-iterations",), type=_ints(0).parse(), nargs="+", metavar="T",
        help={"fit": "iterations (0 = the initialisation) whose Z and K* factor are kept in --output DIR "
                     "(in its model.safetensors; `lswmkc plot DIR` draws their evolution), e.g. 0 1 3 5 10",
              "sweep": "iterations (0 = the initialisation) whose Z and K* factor each run keeps (in the "
                       "model.safetensors of its run directory), e.g. 0 1 3 5 10"}),
    Row("kernel", "precomputed", (Options((*KERNELS, *KERNEL_ALIASES)),),
        "'precomputed' (base kernels), or the kernel built from each feature view: rbf (alias gaussian), "
        "linear, poly (alias polynomial)",
        python=("LSWMKC", "sweep", "compare"), commands=_ALL, flag="--kernel", section="input",
        choices=(*KERNEL_KINDS, *KERNEL_ALIASES), cli_default="rbf",
        cli_note="applies to --features (a store or kernel file is precomputed)",
        help="kernel built from --features, as the Python API's kernel=: rbf (alias gaussian; default, "
             "bandwidth = mean squared distance), linear, or poly (alias polynomial)"),
    Row("kernel_params", None, (Types(dict), None),
        "parameters of the kernel built from features: poly's degree (default 2) and coef0 (default 1.0)",
        python=("LSWMKC", "sweep", "compare"), cli_note="--degree D gives kernel_params={'degree': D}"),
    Row("degree", 2, (_ints(1),),
        "degree of the polynomial kernel built from feature views, K = (X X^T / d + coef0)^degree",
        python=(), target=("lswmkc_dask.kernels.features:FeatureKernels", "degree"), commands=_ALL, flag="--degree",
        section="input", help="degree of the polynomial kernel (default 2)"),
    Row("label_column", None, (), "column of the feature files holding the labels, removed from the features",
        python=(), target=("lswmkc_dask.io:load_features", "label_column"), commands=_READ_FEATURES,
        flag="--label-column", type=int, metavar="J", section="input",
        help="column of the feature files holding the labels, removed from the features (e.g. -1)"),
    Row("index_columns", None, (), "the first K columns of each feature CSV are row indices, dropped",
        python=(), target=("lswmkc_dask.io:load_features", "index_columns"), commands=_READ_FEATURES,
        flag="--index-columns", type=int, metavar="K", section="input",
        help="the first K columns of each --features CSV are row indices (as pandas' to_csv writes one), "
             "dropped; 0: none, nothing checked. Default: a first column holding the row numbers "
             "(0..n-1, 1..n, or an unnamed pandas index) is refused, as it would leak the sample order"),
    Row("max_iter", 100, (_ints(1),), "iteration cap (the reference code stops at 101)",
        python=_FIT, commands=_RUNS, flag="--max-iter", metavar="N",
        help="iteration cap of each fit (default 100)"),
    Row("tol", 1e-3, (_NON_NEGATIVE,),
        "stop when the relative change of ||K*_t - K*_t-1|| is below tol, once t >= min_iter",
        python=_FIT, commands=_RUNS, flag="--tol",
        help="stop tolerance on the relative change of ||K*_t - K*_t-1|| (default 0.001)"),
    Row("min_iter", MIN_ITER, (_ints(1),),
        "iterations before the stop rule is first tested (reference: 20), at most max_iter",
        python=_FIT, commands=_RUNS, flag="--min-iter", metavar="N", cli_default=None,
        cli_note="unset: 20, or --max-iter when that is smaller",
        help="iterations before the stop rule is first tested, at most --max-iter (default 20, as the "
             "reference code, or --max-iter when that is smaller)"),
    Row("n_init", 50, (_ints(1, N_INIT_MAX),),
        f"k-means starts for the labels (lowest inertia kept) and single-start runs of the paper protocol, "
        f"at most {N_INIT_MAX}",
        python=_FIT, commands=_RUNS, flag="--n-init", metavar="N",
        help=f"k-means starts for the labels, and single-start runs of the paper protocol (default 50, "
             f"at most {N_INIT_MAX})"),
    Row("random_state", 0, (_ints(0, 2**32 - 1), Types(np.random.RandomState), None), "seed of the k-means starts",
        python=_FIT, commands=_RUNS, flag="--random-state", metavar="SEED",
        help="seed of the k-means starts (default 0, as the Python API)"),
    Row("repeats", 1, (_ints(1),),
        "repetitions of each run's final k-means step with seeds derived from random_state (mean and std)",
        python=("sweep", "compare"), commands=("sweep", "compare"), flag="--repeats", metavar="N",
        help="repeat each run's final k-means step with N seeds derived from --random-state and record "
             "the mean and std of every metric (report.json, the summary's *_mean/*_std columns; "
             "`lswmkc table` prints mean +- std); default 1"),
    Row("mode", "auto", (Options(("auto", "task", "blockwise")),),
        "how a sweep runs on a cluster: task (one task per grid point), blockwise (fits over row blocks), "
        "auto (by the kernels' size)",
        python=("sweep",), commands=("sweep",), flag="--mode",
        help="task: one task per grid point (small data); blockwise: fits spread over row blocks; "
             "auto (default): by the size of the kernels"),
    Row("concurrency", None, (_ints(1), None),
        "blockwise mode: fits in flight at once; None: the number of workers",
        python=("sweep",), commands=("sweep",), flag="--concurrency", metavar="N",
        help="blockwise mode: fits in flight at once (default: number of workers)"),
    Row("methods", DEFAULT_METHODS, (),
        "the methods compared (\"all\": every one of Table I): Avg-KKM, MKKM, LMKKM, MKKM-MR, LKAM, ONKC, SwMC, "
        "LF-MVC, SPMKC, SMKKM, CAGL, OPLFMVC, LSMKKM, the KNN-localised average kernel and LSWMKC",
        python=("compare",), commands=("compare",), flag="--methods", nargs="+", choices=(*METHODS, "all"),
        metavar="METHOD", section="methods",
        help="methods to run, or all: " + " ".join(METHODS) + " (default avg-kkm mkkm knn lswmkc)"),
    Row("grids", None, (),
        "compared methods' grids replacing their papers' ones: {method: {hyper-parameter: values}}, or on the "
        "command line METHOD:PARAM=V1,V2 per method and parameter",
        python=("compare",), commands=("compare",), flag="--grid", nargs="+", metavar="METHOD:PARAM=V1,V2",
        section="methods", help="a compared method's grid for one hyper-parameter, e.g. onkc:rho=1,2 "
                                "mkkm-mr:lambda_=0.5 (default: each method's paper or demo grid)"),
    Row("taus", TAUS, (),
        "neighbour ratios tau of the KNN mechanism (a sample's round(tau n) nearest neighbours, at least 1), "
        "each in (0, 1]",
        python=("compare",), commands=("compare",), flag="--taus", type=float, nargs="+", metavar="TAU",
        section="methods", help="neighbour ratios of the KNN mechanism, in (0, 1]"),
    Row("degenerate_kernels", "warn", (Options(DEGENERATE_POLICIES),),
        "a numerically constant base kernel: warn (kept, as the reference), drop, or error",
        python=("LSWMKC", "sweep", "compare"), commands=_ALL, flag="--degenerate-kernels",
        section="input",
        help="a numerically constant base kernel: warn = keep it as the reference code does and warn "
             "(default), drop = leave it out, error = stop"),
    Row("eig_driver", "auto", (Options(("auto", *EIG_ROUTES)),),
        "LAPACK route of the eigenpairs of (Z + Z^T)/2 (Theorem 2): auto, mrrr, subset, evd or lanczos",
        python=_FIT, commands=_RUNS, flag="--eig-driver",
        help="eigen route for K*: auto (by the rank of K* and the memory left; default), mrrr "
             "(least memory), subset, evd or lanczos (small rank of K*)"),
    Row("eig_precision", "float64", (Options(FIT_PRECISIONS),),
        "precision of the eigendecomposition of S: float64 (the reference), float32 refined in float64, or mixed "
        "(resident route only: a GPU via eig_device='cuda'/'auto' with CuPy, or FitOptions.resident on "
        "numpy/array-api-strict; float32 iterations, float64 deciding the stop rule and the final K*)",
        python=_FIT, commands=_RUNS, flag="--eig-precision",
        help="precision of the eigendecomposition of S: float64 (default, reproduces the "
             "reference), float32 refined in float64 on its subspace (faster, approximate), or mixed "
             "(the whole fit on a GPU, --eig-device cuda or auto: float32 iterations first, float64 "
             "deciding the stop rule and the final K*)"),
    Row("eig_device", "cpu", (Options(EIG_DEVICES),),
        "where the fit runs: cpu, cuda (a GPU through CuPy) or auto (a GPU from n = 1000 when there is one)",
        python=_FIT, commands=_RUNS, flag="--eig-device",
        help="where the eigendecomposition runs: cpu (default), cuda (a GPU through CuPy: "
             "pip install '.[gpu]' in the checkout; on a cluster, workers started with "
             "--resources GPU=1) or auto (a GPU from n = 1000 when there is one)"),
    Row("eig_threads", None, (_ints(1), None),
        "BLAS threads of the eigendecompositions; None: the cores free when each runs",
        python=_FIT, commands=_RUNS, flag="--eig-threads", metavar="N",
        help={"fit": "threads of each eigendecomposition (default: chosen from the worker's cores)",
              "": "threads of each eigendecomposition (default: chosen from the worker's cores, shared between "
                  "concurrent fits)"}),
    Row("block_rows", None, (_ints(1), None),
        "rows per solver block and per chunk of a store made from arrays; None: chosen from the workers",
        python=("LSWMKC", "sweep", "compare"), commands=_ALL, flag="--block-rows", metavar="N",
        section="input",
        help="rows per store chunk (default: chunks of about 32 MiB)"),
    Row("dtype", "float64", (Options(("float64", "float32")),),
        "precision of the stored kernels: float64 (the reference) or float32 (half the bytes; every step still "
        "accumulates in float64)",
        python=(), target=("lswmkc_dask.io:prepare", "dtype"), commands=("prepare",), flag="--dtype",
        section="output",
        help="precision of the stored kernels (default float64, which reproduces the reference; float32 "
             "halves the store and the bytes read, every step still accumulates in float64)"),
    Row("stack_dtype", "float64", (Options(("float64", "float32")),),
        "precision of the kernel stack a fit or sweep from feature views builds on the GPU: float64 (the reference) "
        "or float32 (half the device memory: n = 40,000, m = 6 in 38 GB on one H200; each entry computed in float64 "
        "and rounded once, every product accumulated in float64); a store's stack has the store's dtype (prepare's "
        "dtype)",
        python=("LSWMKC", "sweep"),
        cli_note="the command line builds a store from --features: `lswmkc prepare --dtype float32` then fit the "
                 "store with --eig-device cuda"),
    Row("cache_kernels", "auto", (_BOOLEAN, Options(("auto",))),
        "keep the kernel row blocks in worker memory (auto: while they fill at most half of it)",
        cli_note="none: auto"),
    Row("client", None, _CLIENT,
        "where to run: a Dask client, a scheduler address or a Where; None: the active client, else this process",
        python=("LSWMKC", "sweep", "compare"),
        cli_note="--scheduler ADDRESS, --scheduler-file FILE, --tls-ca-file/--tls-cert/--tls-key"),
    Row("scheduler", None, (),
        "address of an existing Dask scheduler to run on (tcp:// or tls://)",
        python=(), target=("lswmkc_dask.engine.where:Where", "client"), commands=_CONNECTS, flag="--scheduler",
        metavar="ADDRESS", section="where", help="existing scheduler, e.g. tcp://10.0.0.5:8786 or tls://..."),
    Row("scheduler_file", None, (),
        "scheduler file of an existing Dask scheduler to run on",
        python=(), target=("lswmkc_dask.engine.where:Where", "scheduler_file"), commands=_CONNECTS,
        flag="--scheduler-file", metavar="FILE", section="where",
        help="scheduler file written by `dask scheduler --scheduler-file`"),
    Row("n_workers", None, (_ints(1), None),
        "start a LocalCluster of this many worker processes for the fit",
        commands=_RUNS, flag="--n-workers", metavar="N", section="where",
        cli_note="sweep, compare: Where(n_workers=N) as client",
        help="start a private LocalCluster of N worker processes on 127.0.0.1 (default: see above)"),
    Row("tls_ca_file", None, (), "TLS: certificate authority of a tls:// scheduler (PEM)",
        python=(), target=("lswmkc_dask.engine.cluster:make_security", "tls_ca_file"), commands=_CONNECTS,
        flag="--tls-ca-file", metavar="PEM",
        section="where", help="TLS: certificate authority, for a tls:// scheduler"),
    Row("tls_cert", None, (), "TLS: client certificate for a tls:// scheduler (PEM)",
        python=(), target=("lswmkc_dask.engine.cluster:make_security", "tls_cert"), commands=_CONNECTS,
        flag="--tls-cert", metavar="PEM", section="where", help="TLS: client certificate, for a tls:// scheduler"),
    Row("tls_key", None, (), "TLS: client private key for a tls:// scheduler (PEM)",
        python=(), target=("lswmkc_dask.engine.cluster:make_security", "tls_key"), commands=_CONNECTS, flag="--tls-key",
        metavar="PEM", section="where", help="TLS: client private key, for a tls:// scheduler"),
    Row("processes", None, (_BOOLEAN, None),
        "with no client: True, worker processes; False, a threaded LocalCluster; None: by the kernels' size",
        cli_note="none: by the kernels' size (--n-workers N: N worker processes)"),
    Row("verbose", 0, (_ints(0), Types(bool), Types(np.bool_)), "1: one line per iteration on stderr",
        commands=_RUNS, flag="--quiet", action="store_const", const=0, cli_default=1,
        cli_note="the command line prints them (1) unless --quiet (0; sweep, compare: progress=False)",
        help={"fit": "nothing on stderr but warnings and errors (no header, no line per iteration)",
              "": "no progress lines on stderr (one per grid point)"}),
)

#: name -> :class:`Row`.
_BY_NAME = {r.name: r for r in ROWS}
#: name -> default, for the signatures that read the table.
DEFAULTS: dict[str, Any] = {r.name: r.default for r in ROWS}


def row(name: str) -> Row:
    """The :class:`Row` of parameter ``name`` (KeyError if there is none)."""
    return _BY_NAME[name]


def parameter_constraints(entry: str = "LSWMKC") -> dict[str, tuple[Constraint | None, ...]]:
    """The constraints of the rows that ``entry`` takes (``_parameter_constraints``).

    Parameters
    ----------
    entry : str
        One of :data:`ENTRY_POINTS`.

    Returns
    -------
    dict of str to tuple
        Parameter name -> its constraint; rows without one (checked by their own
        functions) and grids of ``entry`` (``sweep``'s k grid) left out.
    """
    return {r.name: r.constraint for r in ROWS if entry in r.python and r.constraint
            and not (r.grid is not None and entry in r.grid.commands)}  # a grid: checked value by value against n


def _argument(parser: Any, r: Row, command: str) -> None:
    grid = r.grid if r.grid is not None and command in r.grid.commands else None
    kw: dict[str, Any] = {"dest": r.name if grid is None else grid.flag.lstrip("-").replace("-", "_")}
    if r.action:
        kw["action"] = r.action
        if r.action == "store_const":  # a switch: the parameter's value with the flag, its default without
            kw.update(const=r.const, default=r.command_default)
    else:
        for key, value in (("type", r.arg_type), ("choices", r.arg_choices), ("nargs", r.nargs),
                           ("metavar", r.metavar)):
            if value is not None:
                kw[key] = value
        kw["default"] = r.command_default
    if grid is not None:
        kw["nargs"] = "+"
        kw["default"] = None if grid.default is None else list(grid.default)
        kw.setdefault("metavar", {"--alphas": "A", "--gammas": "G"}.get(grid.flag, r.metavar))
    kw["help"] = (grid.help or r.help_for(command)) if grid is not None else r.help_for(command)
    flags = (grid.flag,) if grid is not None else (r.flag, *r.aliases)
    parser.add_argument(*flags, **kw)


def add_arguments(
    parser: Any, command: str, names: tuple[str, ...] | None = None, section: str | None = None,
) -> None:
    """Add the options of ``command`` from the table, in the table's order.

    Parameters
    ----------
    parser : argparse.ArgumentParser or argument group
    command : str
        One of :data:`COMMANDS`.
    names : tuple of str, optional
        Only these rows; default every row with a flag that ``command`` takes.
    section : str, optional
        Only the rows of this section (:data:`SECTIONS`).

    Notes
    -----
    A grid row of a grid command adds its grid flag (``--alphas``, ``nargs="+"``, ``dest`` ``alphas``).
    """
    for r in ROWS:
        if r.flag is None or command not in (*r.commands, *(r.grid.commands if r.grid else ())):
            continue
        if names is not None and r.name not in names:
            continue
        if section is not None and r.section != section:
            continue
        _argument(parser, r, command)


def _where(r: Row) -> str:
    grid = f"; grid {r.grid.flag} ({', '.join(r.grid.commands)})" if r.grid else ""
    flags = " ".join(f"`{f}`" for f in (r.flag, *r.aliases) if f)
    cli = f"{flags} ({', '.join(r.commands)}){grid}" if r.flag else ""
    if r.cli_note:
        cli = f"{cli}; {r.cli_note}" if cli else r.cli_note
    return cli


def markdown_table() -> str:
    """``docs/parameters.md``: one line per parameter of :data:`ROWS`.

    Returns
    -------
    str
        A Markdown document: name, default, Python entry points, flag, doc.
    """
    lines = [
        "# Parameters",
        "",
        "Every parameter of LSWMKC, declared once in `lswmkc_dask/_params.py` (this page is generated:",
        "`python -m lswmkc_dask._params > docs/parameters.md`). *Python* lists the entry points that take",
        "it (`LSWMKC`, `lswmkc_dask.records.FitOptions`, `sweep`, `compare`), or for an option of the command line",
        "alone the Python keyword it sets; *Command line* its flag and the commands that take it. Kernel",
        "names: rbf (alias gaussian), linear, poly (alias polynomial),",
        "the same in Python and on the command line.",
        "",
        "| Parameter | Default | Python | Command line | What it does |",
        "|---|---|---|---|---|",
    ]
    for r in ROWS:
        default = f"`{r.default!r}`"
        if r.cli_default is not ... and r.flag:
            default += f" (command line: `{r.command_default!r}`)"
        python = ", ".join(r.python) or (f"`{r.target[0].split(':')[1]}({r.target[1]}=)`" if r.target else "-")
        lines.append(f"| `{r.name}` | {default} | {python} | {_where(r) or '-'} | "
                     f"{r.doc.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the docs table
    print(markdown_table(), end="")
