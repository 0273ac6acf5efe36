"""The positive eigenpairs of S = (Z + Z^T)/2: the factor of the neighbourhood kernel K*.

Theorem 2 of the paper gives K* = U max(Lambda, 0) U^T from the eigendecomposition of
the symmetrised affinity graph S; :func:`psd_factor` computes its factor ``W = U_+
Lambda_+^(1/2)`` (``K* = W W^T``) by one of the CPU routes :data:`EIG_ROUTES`,
optionally in float32 with a float64 Rayleigh-Ritz refinement.
Which route a fit takes, and the memory checks around it, are the gathered step's
business (:mod:`lswmkc_dask.engine._gathered`); the device route is :mod:`lswmkc_dask.engine.gpu`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh

from ..errors import EigenvectorMemoryError
from . import lapack as _lapack

# The Householder vectors of dsytrd, packed and applied: lapack.pack_reflectors, lapack.apply_q
# (shared with the device's split route, lswmkc_dask.engine.gpu.split_positive_factor).
_reflector_offsets, _pack_reflectors, _apply_q = _lapack.reflector_offsets, _lapack.pack_reflectors, _lapack.apply_q


def _dense_buffer(n, dtype=np.float64):
    """A zeroed n x n array (float64, or ``dtype``) in Fortran order whose pages can be given
    back to the system before the array is freed (an anonymous memory map; see
    :func:`_release_tail`).
    """
    import mmap

    dtype = np.dtype(dtype)
    buf = mmap.mmap(-1, max(dtype.itemsize * n * n, 1))
    return np.frombuffer(buf, dtype=dtype, count=n * n).reshape((n, n), order="F")


def _release_tail(a, keep):
    """Give the pages of ``a``'s buffer after its first ``keep`` entries back to the
    system (``madvise(MADV_DONTNEED)``: the resident memory drops now; the pages would
    read as zeros). Returns the bytes released (0 where not possible).
    """
    import mmap

    owner = a.base
    while owner is not None and not isinstance(owner, mmap.mmap):
        owner = getattr(owner, "obj", None) if isinstance(owner, memoryview) else getattr(owner, "base", None)
    if owner is None or not hasattr(mmap, "MADV_DONTNEED"):
        return 0
    start = -(-a.itemsize * keep // mmap.PAGESIZE) * mmap.PAGESIZE
    length = len(owner) - start
    if length <= 0:
        return 0
    owner.madvise(mmap.MADV_DONTNEED, start, length)
    return length


def mrrr_bytes(n, r, block=128, panel=256):
    """Peak bytes of the "mrrr" route after S's tail is released: the packed reflectors
    (``n^2 / 2``), the r eigenvectors, ``dstemr``'s workspace and the back-transformation's
    temporaries (two ``n x block`` copies of reflectors and an ``n x panel`` product).
    """
    return 4 * n * n + 8 * n * r + 8 * n * (2 * block + panel) + 8 * 30 * n


#: The eigenpairs of the tridiagonal T are computed by ``dstemr`` in up to this many
#: consecutive index ranges, run concurrently in the gathered step's threads (the calls
#: release the GIL; each range is bisected on its own, so the split also pays on one
#: thread). The number of ranges depends on the eigenpairs wanted, never on the threads:
#: the same S gives the same result bit for bit on any machine
#: (docs/performance.md#dstemr-in-index-ranges).
TRIDIAGONAL_RANGES = 4
#: Fewest eigenpairs per range.
TRIDIAGONAL_MIN_RANGE = 64


def _tridiagonal_eigenpairs(d, e, il, iu, u, threads=1):
    """Eigenpairs ``il..iu`` (1-based, ascending) of the tridiagonal T by ``dstemr``.

    The index range is cut into ``min(TRIDIAGONAL_RANGES, k // TRIDIAGONAL_MIN_RANGE)``
    consecutive ranges (at least one; ``k = iu - il + 1``), computed in ``threads``
    threads into column slices of ``u`` (Fortran order, shape (n, k)).

    Returns
    -------
    ndarray of shape (k,)
        The eigenvalues, ascending.

    Raises
    ------
    numpy.linalg.LinAlgError
        ``dstemr`` did not converge on one of the ranges.
    """
    k = iu - il + 1
    ranges = max(1, min(TRIDIAGONAL_RANGES, k // TRIDIAGONAL_MIN_RANGE))
    cuts = [k * i // ranges for i in range(ranges + 1)]
    jobs = [(il + a, il + b - 1, u[:, a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    if ranges == 1 or threads <= 1:
        return np.concatenate([_lapack.dstemr_index(d, e, *job) for job in jobs])
    with ThreadPoolExecutor(min(threads, ranges)) as pool:
        return np.concatenate(list(pool.map(lambda job: _lapack.dstemr_index(d, e, *job), jobs)))


def tridiagonal_positive_pairs(d: np.ndarray, e: np.ndarray, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The eigenpairs of the symmetric tridiagonal T with eigenvalue > 0: the host part of the
    split routes ("mrrr" here, :func:`lswmkc_dask.engine.gpu.split_positive_factor` on a device).

    Counted by inertia (:func:`lswmkc_dask.core.lapack.negative_count`), computed by ``dstemr``
    in index ranges (:func:`_tridiagonal_eigenpairs`, O(n) workspace per eigenvector).

    Parameters
    ----------
    d : ndarray of shape (n,), float64
        T's diagonal.
    e : ndarray of shape (n - 1,), float64
        T's sub-diagonal.
    threads : int
        Threads of the index ranges (the result does not depend on them).

    Returns
    -------
    lam : ndarray of shape (r,)
        The positive eigenvalues, ascending.
    u : ndarray of shape (n, r), Fortran order
        T's eigenvectors.

    Raises
    ------
    numpy.linalg.LinAlgError
        ``dstemr`` did not converge.
    """
    n = d.size
    if n == 1:
        lam = d[d > 0].astype(np.float64)
        return lam, np.ones((1, lam.size), order="F")
    columns = n - _lapack.negative_count(d, e)
    u = np.empty((n, columns), order="F")
    lam = _tridiagonal_eigenpairs(d, e, n - columns + 1, n, u, threads) if columns else np.zeros(0)
    first = int(np.searchsorted(lam, 0.0, side="right"))  # a round-off zero counted positive
    return lam[first:], u[:, first:]


def _positive_eigenpairs_mrrr(s, memory_left=None, parts=None, threads=1):
    """Positive eigenpairs of the symmetric ``s`` (Fortran order, overwritten): the "mrrr"
    route of :func:`psd_factor`.

    ``dsytrd`` in place; the Householder vectors packed and the buffer's tail given
    back; the eigenpairs of T with positive eigenvalue (counted by inertia) by ``dstemr``
    straight into the n x r result (:func:`_tridiagonal_eigenpairs`); then
    :func:`_apply_q`.

    Returns ``(lam, u, failed)``; ``failed`` is True when ``dstemr`` did not converge
    (``s`` is then destroyed and the caller must fall back).
    """
    clock = _PartClock(parts)
    n = s.shape[0]
    d, e, tau = _lapack.sytrd_lower(s)
    clock.lap("reduction")
    if n == 1:
        lam = d[d > 0].copy()
        return lam, np.ones((1, lam.size), order="F"), False
    columns = n - _lapack.negative_count(d, e)  # positive eigenvalues
    clock.count("columns", columns)
    packed, offsets = _pack_reflectors(s)
    released = _release_tail(s, packed.size)
    resident = 8 * n * n - released  # S's buffer now, allocated since memory_left was measured
    for block, panel in ((128, 256), (64, 128), (32, 64)):
        need = mrrr_bytes(n, columns, block, panel) - 4 * n * n
        if memory_left is None or resident + need <= memory_left:
            break
    else:
        from dask.utils import format_bytes as _size

        raise EigenvectorMemoryError(
            f"K* has {columns} positive eigenvalues at n = {n}: the packed reflectors of S "
            f"({_size(resident)}) and the positive eigenvectors ({_size(need)} with workspace) need "
            f"{_size(resident + need)} on one worker, but only {_size(max(memory_left, 0))} were left under "
            f"its memory limit: give the workers more memory (dask worker --memory-limit)"
        )
    if columns == 0:
        return np.zeros(0), np.zeros((n, 0), order="F"), False
    u = np.empty((n, columns), order="F")
    try:
        lam = _tridiagonal_eigenpairs(d, e, n - columns + 1, n, u, threads)
    except np.linalg.LinAlgError:
        return None, None, True
    clock.lap("tridiagonal eigenvectors")
    first = int(np.searchsorted(lam, 0.0, side="right"))  # a round-off zero counted positive
    lam, u = lam[first:], u[:, first:]  # the last columns of a Fortran array: a view
    _apply_q(packed, offsets, tau, u, block=block, panel=panel)
    clock.lap("back-transformation")
    return lam, u, False


#: The "lanczos" route gives way to "mrrr" when it would need more than this fraction
#: of n eigenpairs: ARPACK's cost grows like n k^2 and passes the dense route's n^3
#: between 5% and 6% of n at n = 2000 (docs/performance.md#the-lanczos-route-on-the-s-of-real-fits);
#: the cap leaves room for a rank hint that is too low.
LANCZOS_MAX_K = 0.12


def _sparse_s(z):
    """``S = (Z + Z^T) / 2`` as a CSR matrix from a sparse Z or its list of row blocks.

    Each entry is ``(a + b) * 0.5``, equal bit for bit to the dense :func:`symmetrised`
    (``a/2 + b/2``: halving is exact).
    """
    if isinstance(z, (list, tuple)):
        z = sp.vstack([sp.csr_matrix(b) for b in z], format="csr")
    z = sp.csr_matrix(z, dtype=np.float64)
    return ((z + z.T) * 0.5).tocsr()


def _positive_eigenpairs_lanczos(z, rank_hint=None):
    """Positive eigenpairs of the sparse ``S = (Z + Z^T)/2`` by ARPACK's Lanczos.

    ``k = ceil(1.1 rank_hint) + 10`` largest eigenpairs (``which="LA"``, ``tol=0``:
    converged to round-off), doubled until the smallest one found is <= 0, so that
    every positive eigenvalue is among them. The start vector is fixed (seeded by n):
    ARPACK's own is drawn from a generator whose state carries over between calls, which
    would make results depend on what ran before.

    Returns ``(lam, u)`` ascending, or ``(None, None)`` when more than
    :data:`LANCZOS_MAX_K` of n eigenpairs would be needed or ARPACK fails.
    """
    from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigsh

    s = _sparse_s(z)
    n = s.shape[0]
    limit = int(LANCZOS_MAX_K * n)
    r = int(rank_hint) if rank_hint is not None else n // 20
    k = int(np.ceil(1.1 * r)) + 10
    v0 = np.random.default_rng(n).standard_normal(n)
    while k <= limit and k < n - 1:
        try:
            lam, u = eigsh(s, k=k, which="LA", tol=0, v0=v0)
        except (ArpackNoConvergence, ArpackError):
            return None, None
        if lam.min() <= 0.0:
            order = np.argsort(lam)
            lam, u = lam[order], u[:, order]
            keep = lam > 0.0
            return lam[keep].copy(), np.asfortranarray(u[:, keep])
        k *= 2
    return None, None


def symmetrised(z_blocks: Sequence[sp.spmatrix], dtype: Any = np.float64) -> np.ndarray:
    """The lower triangle of ``S = (Z + Z^T)/2``, dense in Fortran order, from the row
    blocks of a sparse Z.

    The only n x n array is S itself: each block adds ``Z[b, :]/2`` and its transpose in
    place, so no sparse ``Z + Z^T`` or stacked Z is formed. Only the lower triangle is
    written (every LAPACK route reads only that one): the strictly upper triangle stays
    zero in untouched pages of the buffer (:func:`_dense_buffer`), which the system does
    not allocate, so S takes about ``n^2 / 2 x 8`` bytes of memory until it is reduced.
    The lower triangle equals that of ``((Z + Z^T) * 0.5).toarray()`` bit for bit
    (halving is exact, and each entry is the sum of the same two halves).

    Parameters
    ----------
    z_blocks : list of scipy.sparse matrices of shape (b_i, n)
        Consecutive row blocks of Z; ``sum b_i = n``.
    dtype : numpy dtype, default float64
        Of S. float32 (the float32 route) rounds each half as it is added: an entry may
        differ from the float32 rounding of the float64 S by one unit in the last place.

    Returns
    -------
    ndarray of shape (n, n), ``dtype``, Fortran order
        Lower triangle of S; zeros above the diagonal.

    Raises
    ------
    ValueError
        The blocks do not cover the n rows of Z.
    """
    n = z_blocks[0].shape[1]
    s = _dense_buffer(n, dtype)
    start = 0
    for block in z_blocks:
        coo = sp.coo_matrix(block)
        rows = coo.row.astype(np.intp) + start
        cols = coo.col.astype(np.intp)
        half = 0.5 * coo.data
        # Z[i, j]/2 goes to S[max(i, j), min(i, j)]; each statement's positions are
        # distinct, so no addition is lost (the diagonal gets both halves).
        low = rows >= cols
        s[rows[low], cols[low]] += half[low]
        up = rows <= cols
        s[cols[up], rows[up]] += half[up]
        start += block.shape[0]
    if start != n:
        raise ValueError(f"row blocks cover {start} rows of a {n}-column Z")
    return s


#: The eigen routes of :func:`psd_factor` (``eig_driver`` adds "auto", a rule over them).
EIG_ROUTES = ("mrrr", "subset", "evd", "lanczos")


#: Precisions of the LAPACK eigendecomposition (:func:`psd_factor`).
EIG_PRECISIONS = ("float64", "float32")

#: ``LSWMKC(eig_precision=...)``: LAPACK's precisions, and "mixed", float32 iterations of the
#: resident route (:func:`lswmkc_dask.engine.device_fit.fit_resident`), float64 near the stop rule.
FIT_PRECISIONS = (*EIG_PRECISIONS, "mixed")


#: Where the gathered step's eigendecomposition runs (``LSWMKC(eig_device=...)``).
EIG_DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class EigenSpec:
    """How the gathered step computes the positive eigenpairs of S.

    Passed where an ``eig_driver`` string is accepted (:func:`lswmkc_dask.engine.solver.iterate`);
    a plain string means ``EigenSpec(driver=string)``.

    Parameters
    ----------
    driver : {"auto", "mrrr", "subset", "evd", "lanczos"}
        The LAPACK route (CPU), see :func:`psd_factor`.
    precision : {"float64", "float32"}
        See :func:`psd_factor`.
    device : {"cpu", "cuda"}
        "cuda": the array-API route (:mod:`lswmkc_dask.engine.gpu`) on a GPU; on a Dask
        cluster the gathered step is a task with ``resources={"GPU": 1}``. "auto" is
        resolved before the fit (:func:`lswmkc_dask.engine.gpu.resolve_device`).
    """

    driver: str = "auto"
    precision: str = "float64"
    device: str = "cpu"


def eigen_spec(driver: str | EigenSpec) -> EigenSpec:
    """An :class:`EigenSpec` from an ``eig_driver`` string or spec."""
    return driver if isinstance(driver, EigenSpec) else EigenSpec(driver=driver)


def dense_lower_s(z: np.ndarray | sp.spmatrix | Sequence[sp.spmatrix], dtype: Any = np.float64) -> np.ndarray:
    """The lower triangle of ``S = (Z + Z^T)/2``, dense in Fortran order, in a buffer whose
    pages the "mrrr" route can give back (:func:`_dense_buffer`).

    Parameters
    ----------
    z : ndarray or scipy.sparse matrix of shape (n, n), or list of sparse row blocks
    dtype : numpy dtype, default float64
        float32 for the float32 route (half the memory).

    Returns
    -------
    ndarray of shape (n, n), ``dtype``, Fortran order
        Lower triangle of S; zeros above the diagonal.
    """
    if isinstance(z, (list, tuple)):
        return symmetrised(z, dtype=dtype)
    if sp.issparse(z):
        return symmetrised([sp.csr_matrix(z)], dtype=dtype)  # symmetrised while sparse: no dense transpose
    a = np.asarray(z, dtype=np.float64)
    s = _dense_buffer(a.shape[0], dtype)
    for j in range(a.shape[0]):  # the lower triangle only, as symmetrised() does
        s[j:, j] = 0.5 * (a[j:, j] + a[j, j:])
    return s


def _float32_bytes(n, r, block=128, panel=256):
    """Peak bytes of the float32 route after S's tail is released: the packed float32
    reflectors (``n^2 / 2`` float32s) with the r eigenvectors in float64 (``dstemr``) and
    float32 (back-transformed) and the workspace of :func:`_apply_q` and ``dstemr``;
    then, the reflectors freed, the Rayleigh-Ritz step (the float64 basis V, ``S V``, the
    Ritz vectors and three r x r matrices with the workspace of ``dsygvd``).
    """
    return max(2 * n * n + 12 * n * r + 4 * n * (2 * block + panel) + 8 * 30 * n, 28 * n * r + 40 * r * r)


def _projected_s(z, basis, threads=1):
    """``V^T S V`` for ``S = (Z + Z^T)/2``, as the symmetric part of ``V^T Z V``.

    Only Z is applied (half the non-zeros of S), to the row blocks of Z (or of a
    sparse Z cut into ``threads`` blocks) in ``threads`` threads: SciPy's sparse
    product releases the GIL. ``basis`` is ``(n, r)`` float64; returns ``(r, r)``.
    """
    if not isinstance(z, (list, tuple)):
        z = sp.csr_matrix(z, dtype=np.float64)
        step = -(-z.shape[0] // max(threads, 1))
        z = [z[i : i + step] for i in range(0, z.shape[0], step)]
    starts = np.concatenate([[0], np.cumsum([b.shape[0] for b in z])])

    def block(i):
        zv = sp.csr_matrix(z[i], dtype=np.float64) @ basis
        return basis[starts[i] : starts[i + 1]].T @ zv

    if threads > 1 and len(z) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(threads, len(z))) as pool:
            h = sum(pool.map(block, range(len(z))))
    else:
        h = sum(block(i) for i in range(len(z)))
    return 0.5 * (h + h.T)


def _positive_eigenpairs_float32(z, memory_left=None, parts=None, threads=1):
    """Positive eigenpairs of ``S = (Z + Z^T)/2``: float32 subspace, float64 Rayleigh-Ritz.

    The "mrrr" route (:func:`_positive_eigenpairs_mrrr`) with the O(n^3) parts in
    float32:

    1. S's lower triangle in float32 (:func:`symmetrised`, ``n^2 / 2 x 4`` bytes
       resident), reduced in place by LAPACK ``ssytrd`` (half the memory traffic of
       ``dsytrd``); the reflectors are packed and the buffer's tail given back.
    2. The eigenpairs of the tridiagonal T (promoted to float64) above ``-100 eps_32
       ||S||_inf``, counted by inertia and computed by ``dstemr`` (O(n) per
       eigenvector): the margin keeps the eigenvectors of small positive eigenvalues
       that float32 round-off could push below 0.
    3. The back-transformation :func:`_apply_q` in float32 (``2 n^2 r`` flops).
    4. In float64, the Rayleigh-Ritz step on the basis V: ``H = V^T S V``, the
       symmetric part of ``V^T Z V`` with the sparse row blocks of Z applied in
       ``threads`` threads (:func:`_projected_s`; O(nnz(Z) r), no dense float64 S), the
       Gram matrix ``G = V^T V`` (V is orthonormal to float32 round-off only); the
       generalised eigenproblem ``H Y = G Y diag(mu)`` (LAPACK ``dsygvd``, ``Y^T G Y =
       I``) replaces an orthonormalisation of V (half the flops of a QR); the Ritz
       pairs ``(mu, V Y)`` with ``mu > 0`` are returned, ascending.

    The Ritz values are exact eigenvalues of S up to the float32 error of the subspace
    (a few 1e-7 relative): docs/algorithm.md gives the effect on the weights. Peak
    memory :func:`_float32_bytes`; with ``memory_left`` (bytes, or a callable as in
    :func:`psd_factor`) an :class:`EigenvectorMemoryError` is raised before the
    eigenvectors are computed when they would not fit.

    Returns ``(lam, u)``, or ``(None, None)`` when ``dstemr`` did not converge (the
    caller then takes a float64 route).
    """
    clock = _PartClock(parts)
    s_sparse = _sparse_s(z)
    n = s_sparse.shape[0]
    norm = float(abs(s_sparse).sum(axis=1).max()) if s_sparse.nnz else 0.0
    if norm == 0.0:
        return np.zeros(0), np.zeros((n, 0), order="F")
    if n == 1:
        value = float(s_sparse[0, 0])
        return (np.array([value]), np.ones((1, 1), order="F")) if value > 0 else (np.zeros(0), np.zeros((1, 0)))
    del s_sparse  # (the refinement applies Z's blocks: _projected_s)
    left = memory_left("mrrr") if callable(memory_left) else memory_left
    s32 = dense_lower_s(z, dtype=np.float32)
    clock.lap("dense S")
    d32, e32, tau = _lapack.sytrd_lower(s32)
    clock.lap("reduction")
    d, e = d32.astype(np.float64), e32.astype(np.float64)
    margin = 100.0 * float(np.finfo(np.float32).eps) * norm
    columns = n - _lapack.negative_count(d + margin, e)  # eigenvalues of T above -margin
    clock.count("columns", columns)
    packed, offsets = _pack_reflectors(s32)
    released = _release_tail(s32, packed.size)
    resident = 4 * n * n - released
    need = _float32_bytes(n, columns) - 2 * n * n
    if left is not None and resident + need > left:
        from dask.utils import format_bytes as _size

        raise EigenvectorMemoryError(
            f"K* has about {columns} positive eigenvalues at n = {n}: the packed float32 reflectors of S "
            f"({_size(resident)}) and the eigenvectors with their float64 refinement ({_size(need)}) need "
            f"{_size(resident + need)} on one worker, but only {_size(max(left, 0))} were left under its memory "
            f"limit: give the workers more memory (dask worker --memory-limit)"
        )
    if columns == 0:
        return np.zeros(0), np.zeros((n, 0), order="F")
    u = np.empty((n, columns), order="F")
    try:
        _tridiagonal_eigenpairs(d, e, n - columns + 1, n, u, threads)
    except np.linalg.LinAlgError:
        return None, None
    clock.lap("tridiagonal eigenvectors")
    v = np.asfortranarray(u, dtype=np.float32)
    del u
    _apply_q(packed, offsets, tau, v)
    clock.lap("back-transformation")
    del packed, s32
    basis = np.asarray(v, dtype=np.float64, order="F")
    del v
    gram = basis.T @ basis  # the float32 eigenvectors are orthonormal to float32 round-off only
    clock.lap("Gram")
    h = _projected_s(z, basis, threads)
    clock.lap("projected S")
    mu, y = eigh(h, gram, driver="gvd", overwrite_a=True, overwrite_b=True, check_finite=False)
    first = int(np.searchsorted(mu, 0.0, side="right"))
    clock.lap("Ritz pairs")
    out = mu[first:].copy(), np.asfortranarray(basis @ y[:, first:])
    clock.lap("Ritz vectors")
    return out


class _PartClock:
    """Seconds of each part of an eigen route, written into ``parts`` (a dict, or None:
    nothing recorded): ``lap(name)`` adds the seconds since the last lap to
    ``parts[name]``; ``count(name, value)`` records a number (the columns computed).
    """

    def __init__(self, parts):
        self.parts = parts
        self.last = time.perf_counter()

    def lap(self, name):
        now = time.perf_counter()
        if self.parts is not None:
            self.parts[name] = self.parts.get(name, 0.0) + now - self.last
        self.last = now

    def count(self, name, value):
        if self.parts is not None:
            self.parts[name] = value


def psd_factor(
    z: np.ndarray | sp.spmatrix | Sequence[sp.spmatrix], *, driver: str | EigenSpec = "mrrr",
    memory_left: int | Callable[..., int | None] | None = None, rank_hint: int | None = None,
    used: dict[str, Any] | None = None, precision: str = "float64", threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Neighbourhood kernel K* as a factor, Theorem 2.

    ``S = (Z + Z^T) / 2 = U diag(lambda) U^T`` and ``K* = U diag(max(lambda, 0)) U^T``;
    this returns ``W = U_+ diag(sqrt(lambda_+))`` so that ``K* = W W^T`` with only
    the eigenpairs of positive eigenvalue kept.

    Parameters
    ----------
    z : ndarray or scipy.sparse matrix of shape (n, n), or list of sparse row blocks
        The affinity graph; a list of consecutive CSR row blocks (b_i, n) is
        symmetrised into S directly (:func:`symmetrised`), without a stacked copy.
    driver : {"mrrr", "subset", "evd", "lanczos"}
        ``"mrrr"`` (default): tridiagonal reduction of S in place (LAPACK ``dsytrd``),
        the reflectors packed into half of S's memory and the other half given back,
        then the eigenpairs of the positive eigenvalues only by ``dstemr`` (multiple
        relatively robust representations, O(n) per eigenvector) and a blocked
        back-transformation; peak memory ``max(n^2, n^2/2 + n r) x 8`` bytes, and the
        LAPACK calls release the GIL. ``"subset"``: ``eigh(S, subset_by_value=(0,
        inf))`` (LAPACK ``dsyevr``: bisection, then inverse iteration); SciPy allocates
        all n eigenvectors, ``2 n^2 x 8`` bytes. ``"evd"``: the full
        divide-and-conquer ``eigh`` (``dsyevd``), about ``4 n^2 x 8`` bytes.
        ``"lanczos"``: the largest eigenpairs of the sparse S by implicitly restarted
        Lanczos (ARPACK ``eigsh``), ``k = 1.1 rank_hint + 10`` of them, more until the
        smallest one found is not positive (all positive ones are then in hand); no
        dense n x n array, about ``8 n (2 k + 1)`` bytes; it falls back to "mrrr"
        when the positive part is larger than :data:`LANCZOS_MAX_K` of n or ARPACK
        does not converge. Crossovers measured on 2 cores:
        docs/performance.md#the-crossovers.
    memory_left : int or callable, optional
        Bytes this process may still allocate, measured before S is built. With
        "mrrr" (and ``precision="float32"``), a MemoryError is raised before the eigenvectors are computed when the
        packed reflectors and their ``8 n r`` bytes (with workspace) exceed it. A
        callable is called with the dense route's name just before its dense S is
        built and returns the bytes then (a worker makes room there: the "lanczos"
        route needs little memory, its fallback to "mrrr" an n x n S).
    rank_hint : int, optional
        ("lanczos") the expected number of positive eigenvalues, e.g. the previous
        iteration's rank; default 5% of n.
    used : dict, optional
        Filled with ``{"driver": route, "parts": {...}}``: the route that gave the
        result (a fallback of "lanczos" or "mrrr" shows here; "float32-rr" for
        ``precision="float32"``) and the seconds of each part of the "mrrr" route
        ("dense S", "reduction", "tridiagonal eigenvectors", "back-transformation";
        float32 also "Gram", "projected S", "Ritz pairs", "Ritz vectors") with
        "columns", the eigenvectors computed (int); "subset" and "evd" record only
        "dense S", "lanczos" nothing.
    precision : {"float64", "float32"}
        "float64" (default) reproduces the reference. "float32": a dense route is
        replaced by the "mrrr" route with its O(n^3) parts in float32, refined in
        float64 on the subspace it returns (Rayleigh-Ritz,
        :func:`_positive_eigenpairs_float32`), with the memory check of "mrrr";
        "lanczos" stays float64.
    threads : int
        Threads for the ``dstemr`` index ranges of the "mrrr" and float32 routes
        (:func:`_tridiagonal_eigenpairs`; the result does not depend on them) and the
        sparse products of the float32 refinement (``Z V`` by row blocks); BLAS
        threads are set by the caller (threadpoolctl).

    Returns
    -------
    factor : ndarray of shape (n, r)
        ``W`` with ``r`` the number of positive eigenvalues.
    eigenvalues : ndarray of shape (r,)
        The positive eigenvalues, ascending.

    Raises
    ------
    ValueError
        Unknown ``driver`` or ``precision``.
    MemoryError
        ("mrrr" with ``memory_left``) the positive eigenvectors would not fit.
    """
    if driver not in EIG_ROUTES:
        raise ValueError(f"driver must be one of {', '.join(map(repr, EIG_ROUTES))}, got {driver!r}")
    if precision not in EIG_PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(map(repr, EIG_PRECISIONS))}, got {precision!r}")

    parts = None
    if used is not None:
        parts = used["parts"] = {}

    def dense_s():
        clock = _PartClock(parts)
        s = dense_lower_s(z)
        clock.lap("dense S")
        return s

    if driver == "lanczos":
        lam, u = _positive_eigenpairs_lanczos(z, rank_hint)
        if lam is None:  # too many positive eigenvalues for Lanczos, or no convergence
            driver = "mrrr"
    if precision == "float32" and driver != "lanczos":
        lam, u = _positive_eigenpairs_float32(z, memory_left, parts, threads)
        if lam is not None:
            if used is not None:
                used["driver"] = "float32-rr"
            u *= np.sqrt(lam)
            return u, lam
        driver = "subset"  # dstemr did not converge: the float64 bisection and inverse iteration
    if driver == "mrrr":
        left = memory_left(driver) if callable(memory_left) else memory_left
        lam, u, failed = _positive_eigenpairs_mrrr(dense_s(), left, parts, threads)
        if failed:  # dstemr did not converge: the bisection and inverse iteration route
            driver = "subset"
    if driver == "subset":
        lam, u = eigh(dense_s(), subset_by_value=(0.0, np.inf), overwrite_a=True, check_finite=False)
        u = np.array(u, order="F")  # only the r columns, not SciPy's n x n buffer
    elif driver == "evd":
        lam, u = eigh(dense_s(), driver="evd", overwrite_a=True, check_finite=False)
        keep = lam > 0
        lam, u = lam[keep], u[:, keep]
    if used is not None:
        used["driver"] = driver
    u *= np.sqrt(lam)  # in place: no second n x r array
    return u, lam
