"""Base kernels from features, and the preprocessing of docs/algorithm.md section 0.

Every function works on a block of rows so that the zarr store can be written without
holding a whole ``n x n`` kernel: :class:`FeatureKernels` produces kernel rows from
multi-view features on demand, :func:`scan_kernels` checks the raw kernels and gathers
the statistics of centring in a first pass, and :func:`centre_normalise_rows`
(:mod:`lswmkc_dask.core.equations`) centres and normalises a row block.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .._threads import blas_threads, limit_blas
from ..core.equations import DIAGONAL_JITTER, centre_normalise_rows, mean_of_means
from ..errors import KernelInputError, Param, ParameterError, UncheckedKernelWarning, Verbatim, warn_at_caller
from ._scan import KERNEL_MAX_ABS as KERNEL_MAX_ABS
from ._scan import KERNEL_MIN_ABS as KERNEL_MIN_ABS
from ._scan import (
    BlockScan,
    centred_diagonal_checks,
    refuse_bad_kernels,
)

#: Kernels built from feature views, by their canonical names (scikit-learn's
#: ``pairwise_kernels`` names): the same words in Python (``kernel=``) and on the command
#: line (``--kernel``).
KERNEL_KINDS = ("rbf", "linear", "poly")
#: Other spellings accepted everywhere for the same kernels.
KERNEL_ALIASES = {"gaussian": "rbf", "polynomial": "poly"}
#: What :func:`lswmkc_dask.prepare` does with a degenerate kernel.
DEGENERATE_POLICIES = ("warn", "drop", "error")
#: Largest accepted ``|x|`` of a feature value: features are z-scored (their squares
#: summed) and their squared distances taken, which overflows float64 from about 1e154.
FEATURE_MAX_ABS = 1e150
#: A preprocessed kernel is refused as not positive semidefinite when its smallest
#: eigenvalue is below ``-PSD_RTOL`` times its largest (rounding leaves the shipped kernels
#: above -2.1e-16 x; the Cholesky test itself errs by about ``n eps``).
PSD_RTOL = 1e-6
#: Above this n the eigenvalue check (dense n x n kernels, O(n^3 / 3) each) is skipped with a warning.
PSD_CHECK_MAX_N = 5000
#: Memory for the dense kernels of that check, assembled this many bytes at a time.
PSD_CHECK_BYTES = 256 * 2**20


TARGET_CHUNK_BYTES = 32 * 2**20
#: What to do about a feature value beyond :data:`FEATURE_MAX_ABS` (messages).
TOO_LARGE_FEATURE = (
    "the features are standardised and their squared distances taken, which overflows float64 at such "
    "values; divide that feature (column) by a power of ten: each feature is z-scored first, so its scale "
    "does not change the kernels"
)


def canonical_kernel(kernel: Any, precomputed: bool = False) -> str:
    """The canonical name of a kernel built from features (an alias resolved).

    Parameters
    ----------
    kernel : str
        One of :data:`KERNEL_KINDS` (``"rbf"``, ``"linear"``, ``"poly"``) or an alias of
        :data:`KERNEL_ALIASES` (``"gaussian"`` for ``"rbf"``, ``"polynomial"`` for
        ``"poly"``); ``"precomputed"`` too when ``precomputed``.
    precomputed : bool
        Whether ``"precomputed"`` (base kernels given, none built) is accepted.

    Returns
    -------
    str
        ``"rbf"``, ``"linear"``, ``"poly"`` (or ``"precomputed"``).

    Raises
    ------
    ParameterError
        (a ValueError) Any other value; the message lists the names and their aliases.
    """
    accepted = {**{k: k for k in KERNEL_KINDS + (("precomputed",) if precomputed else ())}, **KERNEL_ALIASES}
    if isinstance(kernel, str) and kernel in accepted:
        return accepted[kernel]
    names = (("'precomputed', " if precomputed else "") + ", ".join(map(repr, KERNEL_KINDS))
             + " (aliases: " + ", ".join(f"{a!r} for {c!r}" for a, c in KERNEL_ALIASES.items()) + ")")
    raise ParameterError("{} must be one of {}, got {!r}", Param("kernel"), Verbatim(names), kernel)


def default_block_rows(n_kernels: int, n_samples: int, target_bytes: int = TARGET_CHUNK_BYTES) -> int:
    """Rows per block so that one ``(m, rows, n)`` float64 chunk is about 32 MiB.

    Parameters
    ----------
    n_kernels, n_samples : int
        m and n.
    target_bytes : int
        Target chunk size in bytes.

    Returns
    -------
    int
        ``1 <= rows <= n``.
    """
    return int(max(1, min(n_samples, target_bytes // (8 * n_kernels * n_samples))))


def _zscore(x):
    """``(z, mu, sd)``: the float64 view ``x`` standardised per feature, with its means and scales."""
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0  # constant features stay 0 after centring
    return (x - mu) / sd, mu, sd


def text_columns(view: Any) -> list[str]:
    """A feature view's column names: ``.columns`` where all are text (a pandas DataFrame's, a CSV
    header's), else ``[]`` (an array, or a DataFrame of an array's default 0, 1, ... names).
    """
    columns = getattr(view, "columns", None)
    if columns is None or not len(columns) or not all(isinstance(c, str) for c in columns):
        return []
    return [str(c) for c in columns]


def _real_view(view: Any, name: str) -> np.ndarray:
    """One feature view (n, d) as float64; a :class:`KernelInputError` naming the view (``name``)
    for complex values (the imaginary part would be dropped) or an entry that is not a number.
    """
    a = np.asarray(view)
    if np.iscomplexobj(a):
        raise KernelInputError(f"{name} has complex values; feature views must be real")
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        pass
    flat = a.reshape(a.shape[0], -1) if a.ndim >= 1 and a.size else a.reshape(1, -1)
    for (r, c), x in np.ndenumerate(flat):
        try:
            complex(x) if isinstance(x, complex) else float(x)
        except (TypeError, ValueError):
            raise KernelInputError(f"{name}: sample {r}, feature {c}: '{x}' is not a number") from None
        if isinstance(x, complex):
            raise KernelInputError(f"{name} has complex values; feature views must be real")
    raise KernelInputError(f"{name} cannot be read as numbers (dtype {a.dtype})")


def rbf_bandwidth(z: np.ndarray) -> float:
    """The rbf bandwidth of the z-scored view ``z`` (n, d): its mean squared pairwise distance,
    ``2 (mean ||x||^2 - ||mean x||^2)``.
    """
    mean = z.mean(axis=0)
    return 2.0 * (np.einsum("ij,ij->i", z, z).mean() - float(np.dot(mean, mean)))


class FeatureKernels:
    """Base kernels computed row block by row block from multi-view features.

    One kernel per view, on z-scored features: ``"rbf"``: ``K = exp(-D2 / mean(D2))``
    (the mean over all n^2 pairs, ``2 (mean ||x||^2 - ||mean x||^2)``); ``"linear"``:
    ``K = X X^T``; ``"poly"``: ``K = (X X^T / d + coef0)^degree`` (d features).

    Parameters
    ----------
    views : sequence of ndarray, each of shape (n, d_v)
        Features of each view, samples in rows.
    kernel : {"rbf", "linear", "poly"}, default "rbf"
        Or an alias: ``"gaussian"`` (``"rbf"``), ``"polynomial"`` (``"poly"``).
    degree : int, default 2
        Degree of the polynomial kernel.
    coef0 : float, default 1.0
        Constant of the polynomial kernel.
    names : sequence of str, optional
        One name per view (e.g. the feature files' stems): the kernels' names in a store
        and in messages (default ``kernel 0``, ...).

    Attributes
    ----------
    names : list of str or None
        As given.
    views : list of ndarray, each of shape (n, d_v)
        The views z-scored per feature.
    means, scales : list of ndarray, each of shape (d_v,)
        ``views[v] = (input[v] - means[v]) / scales[v]`` (scale 1 for a constant feature).
    bandwidths : list of float
        The rbf bandwidth of each view (its mean squared pairwise distance).

    Raises
    ------
    KernelInputError
        The views have different numbers of samples (a hint at a header line read as a
        sample), are not 2-D, or hold NaN/Inf or huge values; ``names`` not one per view.
    ValueError
        If ``kernel`` is unknown (:func:`canonical_kernel`).
    """

    def __init__(self, views, kernel="rbf", degree=2, coef0=1.0, names=None):
        kernel = canonical_kernel(kernel)
        views = list(views)
        if not views:
            raise KernelInputError("no feature views given")
        if names is not None:
            names = [str(x) for x in names]
            if len(names) != len(views):
                raise KernelInputError(f"{len(names)} view names for {len(views)} feature views")

        def view(i):
            return f"view {i}" + (f" ({names[i]})" if names is not None else "")

        #: the views' column names where they came with text ones (a DataFrame, a CSV's header)
        self.columns = [text_columns(v) for v in views]
        views = [_real_view(v, view(i)) for i, v in enumerate(views)]

        for i, v in enumerate(views):
            if v.ndim != 2:
                raise KernelInputError(f"{view(i)} must be 2-D (samples x features), got shape {v.shape}")
            if v.shape[0] != views[0].shape[0]:
                hint = ""
                if abs(v.shape[0] - views[0].shape[0]) == 1:
                    more = view(i) if v.shape[0] > views[0].shape[0] else view(0)
                    hint = (f"; one sample more in {more}: if its file begins with a header line of numbers (other "
                            "than the column numbers 0,1,2,... pandas writes, which are skipped), it was read as "
                            "a sample: read the features with header=True (--header)")
                raise KernelInputError(
                    f"{view(i)} has {v.shape[0]} samples but {view(0)} has {views[0].shape[0]}{hint}"
                )
            bad = ~np.isfinite(v)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise KernelInputError(
                    f"view {i} has {int(bad.sum())} NaN/Inf feature values (first at sample {r}, feature {c})"
                )
            big = np.abs(v) > FEATURE_MAX_ABS
            if big.any():
                r, c = np.argwhere(big)[0]
                raise KernelInputError(
                    f"view {i}, sample {r}, feature {c}: {v[r, c]:.3g} is beyond +-{FEATURE_MAX_ABS:.0e} "
                    f"({int(big.sum())} such values in the view): {TOO_LARGE_FEATURE}"
                )
        self.names = names
        self.kernel = kernel
        self.degree = int(degree)
        self.coef0 = float(coef0)
        self.views, self.means, self.scales = map(list, zip(*map(_zscore, views)))
        self.sq_norms = [np.einsum("ij,ij->i", v, v) for v in self.views]
        self.bandwidths = [rbf_bandwidth(v) for v in self.views]
        n = views[0].shape[0]
        self.shape = (len(views), n, n)

    def rows(self, start, stop):
        """Rows ``start:stop`` of every kernel, an ndarray of shape (m, stop - start, n)."""
        from array_api_compat import numpy as xnp

        return raw_rows(self, self.views, self.sq_norms, start, stop, xnp)


def raw_rows(fk: Any, views: Any, norms: Any, start: int, stop: int, xp: Any) -> Any:
    """Rows ``start:stop`` of every raw kernel of ``fk`` from its z-scored ``views`` and their squared
    norms, on their namespace ``xp``: float64, shape (m, b, n).
    """
    out = []
    for x, sq, bw in zip(views, norms, map(float, fk.bandwidths)):
        gram = x[start:stop, :] @ xp.matrix_transpose(x)
        if fk.kernel == "rbf":
            d2 = xp.clip(sq[start:stop, None] + sq[None, :] - 2.0 * gram, min=0.0)
            gram = xp.exp(-d2 / bw) if bw > 0 else xp.ones_like(gram)
        elif fk.kernel == "poly":
            gram = (gram / x.shape[1] + fk.coef0) ** fk.degree
        out.append(gram)
    return xp.stack(out)


class ArrayKernelSource:
    """In-memory base kernels as a blockwise source.

    Parameters
    ----------
    kernels : array_like of shape (m, n, n), or a sequence of m arrays of shape (n, n)
        Raw base kernels.

    Attributes
    ----------
    origin : str or None
        The file the kernels came from (set by :func:`lswmkc_dask.io.open_kernel_file`),
        named by the messages of :func:`scan_kernels`.

    Raises
    ------
    KernelInputError
        If a kernel is not square, the kernels have different sizes, or there are
        none (shape (0, n, n)).
    """

    origin: str | None = None

    def __init__(self, kernels):
        import scipy.sparse as sp

        if sp.issparse(kernels) or (isinstance(kernels, (list, tuple)) and any(sp.issparse(k) for k in kernels)):
            raise KernelInputError("sparse input is not supported: pass dense base kernels (e.g. K.toarray())")
        if isinstance(kernels, (list, tuple)):
            mats = [np.asarray(k) for k in kernels]
            if not mats:
                raise KernelInputError("no kernels given")
            for p, k in enumerate(mats):
                if k.ndim != 2 or k.shape[0] != k.shape[1]:
                    hint = (
                        " (a list of feature views of shape (n, d_v) needs kernel='rbf', 'linear' or 'poly', "
                        "not the default kernel='precomputed')"
                        if k.ndim == 2
                        else ""
                    )
                    raise KernelInputError(f"kernel {p} is not square: shape {k.shape}{hint}")
                if k.shape != mats[0].shape:
                    raise KernelInputError(
                        f"kernel {p} has shape {k.shape} but kernel 0 has shape {mats[0].shape}"
                    )
            kernels = np.stack(mats)
        kernels = np.asarray(kernels)
        if kernels.dtype.kind == "c":
            raise KernelInputError(
                f"Complex data not supported: the kernels have dtype {kernels.dtype}; base kernels are real"
            )
        if kernels.ndim == 2:
            kernels = kernels[None]
        if kernels.ndim != 3:
            raise KernelInputError(f"kernels must have shape (m, n, n), got {kernels.shape}")
        if kernels.shape[0] == 0:
            raise KernelInputError(
                f"no kernels: the stack has shape {kernels.shape} (m = 0 kernels of {kernels.shape[1]} x "
                f"{kernels.shape[2]}); give at least one base kernel"
            )
        if kernels.shape[1] != kernels.shape[2]:
            hint = ""
            if kernels.shape[0] == kernels.shape[1]:
                hint = (
                    f"; this looks like MATLAB's (n, n, m) order ({kernels.shape[2]} kernels of "
                    f"{kernels.shape[0]} x {kernels.shape[1]}): pass np.moveaxis(K, 2, 0)"
                )
            raise KernelInputError(f"kernels are not square: shape (m, n, n) expected, got {kernels.shape}{hint}")
        if kernels.dtype.kind not in "fiub":
            raise KernelInputError(f"kernels must be numeric, got dtype {kernels.dtype}")
        self.kernels = kernels
        self.shape = kernels.shape

    def rows(self, start, stop):
        """Rows ``start:stop`` of every kernel, shape (m, b, n), float64."""
        return np.asarray(self.kernels[:, start:stop, :], dtype=np.float64)

    def transposed_rows(self, start, stop):
        """Columns ``start:stop`` of every kernel, transposed: shape (m, b, n)."""
        return np.asarray(self.kernels[:, :, start:stop], dtype=np.float64).transpose(0, 2, 1)


@dataclass
class KernelStats:
    """Global statistics from the first pass of :func:`scan_kernels`.

    Attributes
    ----------
    col_means : ndarray of shape (m, n)
        Column means d of each symmetrised kernel.
    diag : ndarray of shape (m, n)
        Diagonal of each centred kernel, jitter included (all > 0).
    max_asymmetry : ndarray of shape (m,)
        ``max |K - K^T|`` of each raw kernel (symmetrised away).
    degenerate : dict of int to str
        Kernels that are numerically constant (see :data:`DEGENERATE_RTOL`), each with
        the message that says why; their diagonal may be tiny or, for some samples,
        not positive even with the jitter.
    duplicates : list of (int, int)
        Pairs ``(p, q)``, ``p < q``, of base kernels whose raw entries are identical.
    """

    col_means: np.ndarray
    diag: np.ndarray
    max_asymmetry: np.ndarray = field(default_factory=lambda: np.zeros(0))
    degenerate: dict = field(default_factory=dict)
    duplicates: list = field(default_factory=list)


def duplicate_message(pairs, names):
    """The warning for identical base kernels ``pairs`` [(p, q), ...] (0-based, p < q).

    Parameters
    ----------
    pairs : list of (int, int)
    names : sequence of str
        Kernel names, in input order.

    Returns
    -------
    str
        Names every identical pair, by name and 0-based index.
    """
    def label(p):
        return names[p] if names[p] == f"kernel {p}" else f"kernel {p} ({names[p]})"

    listed = "; ".join(f"{label(p)} and {label(q)}" for p, q in pairs)
    return (f"identical base kernels: {listed}. Each copy counts once more in the combined kernel and takes a "
            f"kernel weight of its own (some public kernel files store one kernel several times); they are kept "
            f"as given: leave the copies out if they are not meant")


def scan_kernels(
    source: Any,
    block_rows: int | None = None,
    symmetry_tol: float = 1e-6,
    names: Sequence[str] | None = None,
) -> KernelStats:
    """First pass over a kernel source: validate, and collect centring statistics.

    Parameters
    ----------
    source : ArrayKernelSource, H5KernelSource or FeatureKernels
    block_rows : int, optional
    symmetry_tol : float
        Largest accepted ``max|K - K^T| / max|K|``, ``>= 0``; smaller asymmetry is
        symmetrised.
    names : sequence of str, optional
        Kernel names for messages (default ``"kernel p"``).

    Returns
    -------
    KernelStats

    Raises
    ------
    KernelInputError
        NaN/Inf entries; ``max|K|`` outside [:data:`KERNEL_MIN_ABS`, :data:`KERNEL_MAX_ABS`];
        a kernel far from symmetric; in a kernel that is not degenerate, a centred
        diagonal entry negative or not above ``1e-10 max|K|``, or (``n <=``
        :data:`PSD_CHECK_MAX_N`) a smallest eigenvalue below ``-PSD_RTOL`` x the largest.
        Each names the kernel, its file and where. Degenerate kernels are listed in
        :attr:`KernelStats.degenerate` for the caller's policy.
    ParameterError
        (a ValueError) ``symmetry_tol`` negative or NaN, before anything is read.

    Warns
    -----
    UncheckedKernelWarning
        ``n >`` :data:`PSD_CHECK_MAX_N`: the eigenvalue check was skipped.
    """
    if not symmetry_tol >= 0:  # NaN too: no asymmetry would be refused
        raise ParameterError("{} must be >= 0, got {!r}", Param("symmetry_tol"), symmetry_tol)
    m, n, _ = source.shape
    origin = getattr(source, "origin", None)
    of = f" of {origin}" if origin else ""
    names = list(names) if names is not None else [f"kernel {p}" for p in range(m)]
    block_rows = block_rows or default_block_rows(m, n)
    symmetric = isinstance(source, FeatureKernels)
    scan = BlockScan(m, n)
    # The raw kernels kept for the eigenvalue check (no second pass) where they fit its memory.
    raw = np.empty((m, n, n)) if n <= PSD_CHECK_MAX_N and 8 * m * n * n <= PSD_CHECK_BYTES else None
    for start in range(0, n, block_rows):
        stop = min(n, start + block_rows)
        rows = source.rows(start, stop)
        if raw is not None:
            raw[:, start:stop] = rows
        scan.add(start, rows, None if symmetric else partial(source.transposed_rows, start, stop))
    refuse_bad_kernels(scan, symmetry_tol, names, of)
    col_means = scan.col_sums / n
    e = mean_of_means(col_means)
    # The reference's order of operations: ((K_ii - d_i) - d_i) + e (see centre_normalise_rows).
    centred_diag = ((scan.raw_diag - col_means) - col_means) + e[:, None]
    diag = centred_diag + DIAGONAL_JITTER
    degenerate = centred_diagonal_checks(centred_diag, diag, scan, names, of)
    check = [p for p in range(m) if p not in degenerate]
    if check and n > PSD_CHECK_MAX_N:
        warn_at_caller(
            f"the base kernels{of} were not checked for positive semidefiniteness (n = {n} > {PSD_CHECK_MAX_N}: "
            f"the check needs each dense n x n kernel and O(n^3) work); a kernel with negative eigenvalues (not "
            f"a kernel matrix) would be fitted as it is",
            UncheckedKernelWarning,
        )
    elif check:
        _check_psd(source, raw, check, block_rows, col_means, diag, names, of)
    return KernelStats(col_means=col_means, diag=diag, max_asymmetry=scan.asym, degenerate=degenerate,
                       duplicates=scan.same)


def _preprocessed(source, raw, kernels, block_rows, col_means, diag):
    """The preprocessed kernels ``kernels`` (indices) of ``source``, dense: shape (len(kernels), n, n),
    from ``raw`` (m, n, n) where given and one kernel is asked for, else by a pass over ``source``.
    """
    if raw is not None and len(kernels) == 1:
        p = int(kernels[0])
        return centre_normalise_rows(raw[p][None], 0, col_means[p][None], diag[p][None], raw[p].T[None])
    n = source.shape[1]
    out = np.empty((len(kernels), n, n))
    for start, stop, block in preprocessed_blocks(source, kernels, block_rows, col_means, diag):
        out[:, start:stop] = block
    return out


def preprocessed_blocks(source: Any, kernels: Sequence[int], block_rows: int, col_means: np.ndarray,
                        diag: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """Each row block ``(start, stop, rows)`` of the kernels ``kernels`` (ascending indices) of ``source``,
    centred and normalised with the statistics ``col_means``, ``diag`` of all its kernels, shape (m, n).
    """
    m, n, _ = source.shape
    sel = None if len(kernels) == m else np.asarray(kernels)  # all kept: no copy of the rows
    if sel is not None:
        col_means, diag = col_means[sel], diag[sel]
    symmetric = isinstance(source, FeatureKernels)
    for start in range(0, n, block_rows):
        stop = min(n, start + block_rows)
        rows = source.rows(start, stop)
        trows = None if symmetric else source.transposed_rows(start, stop)
        if sel is not None:
            rows, trows = rows[sel], None if trows is None else trows[sel]
        yield start, stop, centre_normalise_rows(rows, start, col_means, diag, trows)


def _largest_eigenvalue_bound(k, iterations=12):
    """A lower bound of the largest eigenvalue of the symmetric ``k`` (a Rayleigh quotient
    after a few power iterations from a fixed start; at least the largest diagonal entry).
    """
    v = np.random.default_rng(0).standard_normal(k.shape[0])
    best = float(np.max(np.diag(k)))
    for _ in range(iterations):
        w = k @ v
        norm = float(np.linalg.norm(w))
        if not norm > 0:
            break
        best = max(best, float(v @ w) / float(v @ v))
        v = w / norm
    return best


def _check_psd(source, raw, kernels, block_rows, col_means, diag, names, of):
    """Refuse a preprocessed kernel whose smallest eigenvalue is below ``-PSD_RTOL`` x its largest:
    Cholesky of ``K + PSD_RTOL lambda I`` (``lambda`` a lower bound of the largest eigenvalue),
    and where it fails the extreme eigenvalues, for the message and the decision.
    """
    from scipy.linalg import eigvalsh
    from scipy.linalg.lapack import dpotrf

    n = source.shape[1]
    per_pass = 1 if raw is not None else max(1, PSD_CHECK_BYTES // (8 * n * n))  # (from raw: one at a time)
    with limit_blas(blas_threads(None, None, n)):
        for first in range(0, len(kernels), per_pass):
            group = kernels[first : first + per_pass]
            dense = _preprocessed(source, raw, group, block_rows, col_means, diag)
            for p, k in zip(group, dense):
                shift = PSD_RTOL * _largest_eigenvalue_bound(k)
                k[np.diag_indices(n)] += shift
                _, info = dpotrf(k.T, lower=1, clean=0, overwrite_a=1)  # k.T: the same matrix, Fortran order
                if info == 0:
                    continue
                if info < 0:  # pragma: no cover - an argument error, not expected
                    raise RuntimeError(f"LAPACK dpotrf failed (info = {info})")
                k = _preprocessed(source, raw, [p], block_rows, col_means, diag)[0]  # factorised in place: again
                low = float(eigvalsh(k, subset_by_index=[0, 0], check_finite=False)[0])
                high = float(eigvalsh(k, subset_by_index=[n - 1, n - 1], check_finite=False)[0])
                if low >= -PSD_RTOL * high:  # the bound of the largest eigenvalue was low: within tolerance
                    continue
                raise KernelInputError(
                    f"{names[p]}{of} is not positive semidefinite: after centring and normalisation its smallest "
                    f"eigenvalue is {low:.4g}, against {high:.4g} for the largest (ratio {low / high:.3g}, below "
                    f"-{PSD_RTOL:g}, far beyond rounding); a kernel (Gram) matrix has no negative eigenvalues: "
                    f"check how it was computed (a similarity that is not a kernel, e.g. a correlation with missing "
                    f"values filled in or a distance-based score, can be made one by clipping its negative "
                    f"eigenvalues)"
                )


def kernels_from_features(
    views: Sequence[np.ndarray],
    kernel: str = "rbf",
    degree: int = 2,
    coef0: float = 1.0,
) -> np.ndarray:
    """Dense base kernels from multi-view features (see :class:`FeatureKernels`).

    Parameters
    ----------
    views : sequence of ndarray, each of shape (n, d_v)
    kernel : {"rbf", "linear", "poly"}, default "rbf"
        Or an alias: ``"gaussian"`` (``"rbf"``), ``"polynomial"`` (``"poly"``), as
        :class:`lswmkc_dask.LSWMKC` ``kernel=`` and ``lswmkc --kernel``.
    degree, coef0 : polynomial kernel parameters

    Returns
    -------
    ndarray of shape (m, n, n)
        Raw (not yet centred or normalised) kernels, one per view.

    Raises
    ------
    ParameterError
        (a ValueError) An unknown ``kernel``.
    KernelInputError
        Unusable views (see :class:`FeatureKernels`).
    """
    fk = FeatureKernels(views, kernel, degree, coef0)
    return fk.rows(0, fk.shape[1])


def feature_kernels_on(fk: FeatureKernels, link: Any, block_rows: int | None = None,
                       dtype: str = "float64") -> tuple[Any, Any, Any]:
    """The preprocessed kernels of ``fk`` built in ``link``'s device memory, block by block.

    The z-scored views go to the device; each row block of the raw kernels is computed
    there in float64 as :meth:`FeatureKernels.rows` does, the statistics formed as
    :func:`scan_kernels` forms them, and the blocks centred and normalised
    (:func:`lswmkc_dask.core.centre_normalise_rows`). In float32 a second pass computes
    each block again and rounds it once into the stack. Nothing of size n x n crosses;
    :func:`scan_kernels`' checks are not made (an rbf, linear or poly kernel is PSD).

    Parameters
    ----------
    fk : FeatureKernels
    link : lswmkc_dask.engine.device_fit.Link
        The device (its namespace and device); copies are recorded as "features".
    block_rows : int, optional
        Rows per block (default :func:`default_block_rows`).
    dtype : {"float64", "float32"}
        The stack's precision on the device.

    Returns
    -------
    kernels : array of shape (m, n, n), in ``dtype``, on the device
        The host route's preprocessed kernels to rounding (about 1e-15 in float64).
    col_means, diag : ndarray of shape (m, n)
        The training statistics on the host (recorded as "statistics"), as
        :func:`scan_kernels` gives them.
    """
    xp = link.xp
    m, n, _ = fk.shape
    b = default_block_rows(m, n) if block_rows is None else max(1, int(block_rows))
    blocks = [(start, min(n, start + b)) for start in range(0, n, b)]
    views = [link.to_device(view, "features") for view in fk.views]
    norms = [xp.sum(x * x, axis=1) for x in views]
    raw = partial(raw_rows, fk, views, norms, xp=xp)

    low = dtype == "float32"
    out = xp.empty((m, n, n), dtype=xp.float32 if low else xp.float64, device=link.device)
    col_sums, raw_diag = xp.zeros((m, n), dtype=xp.float64, device=link.device), []
    for start, stop in blocks:
        rows = raw(start, stop)
        if low:  # symmetric kernels: the column sums are the rows' sums over the blocks
            col_sums = col_sums + xp.sum(rows, axis=1)
            raw_diag.append(xp.asarray(xp.linalg.diagonal(rows[:, :, start:stop]), copy=True))  # not a view of rows
        else:
            out[:, start:stop, :] = rows
    col_means = col_sums / n if low else xp.mean(out, axis=1)
    e = mean_of_means(col_means, xp)
    raw_diag = xp.concat(raw_diag, axis=1) if low else xp.linalg.diagonal(out)
    diag = (((raw_diag - col_means) - col_means) + e[:, None]) + DIAGONAL_JITTER
    for start, stop in blocks:
        rows = raw(start, stop) if low else out[:, start:stop, :]
        rows = centre_normalise_rows(rows, start, col_means, diag, xp=xp)
        out[:, start:stop, :] = xp.astype(rows, out.dtype, copy=False)
    return out, link.to_host(col_means, "statistics"), link.to_host(diag, "statistics")


def preprocess_kernels(kernels: Any) -> np.ndarray:
    """Symmetrise, centre and normalise in-memory kernels (docs/algorithm.md section 0).

    Parameters
    ----------
    kernels : array_like of shape (m, n, n)

    Returns
    -------
    ndarray of shape (m, n, n)
        Preprocessed kernels with unit diagonal.

    Raises
    ------
    KernelInputError
        As :func:`lswmkc_dask.prepare` (NaN/Inf, asymmetry, non-positive diagonal).
    """
    source = ArrayKernelSource(kernels)
    stats = scan_kernels(source)
    n = source.shape[1]
    return centre_normalise_rows(source.rows(0, n), 0, stats.col_means, stats.diag, source.transposed_rows(0, n))
