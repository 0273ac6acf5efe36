"""The paper's equations as pure NumPy functions on a block of rows.

Nothing here knows about Dask: every function takes the rows ``rows`` (a slice of
sample indices, the *row block*) of the base kernels and returns the matching rows of
the result, so that :mod:`lswmkc_dask.solver` can map them over row blocks on the
workers. Equation numbers follow docs/algorithm.md (Li et al., "Local Sample-weighted
Multiple Kernel Clustering with Consensus Discriminative Graph", IEEE TNNLS):

=====================  ==========================================
function               source
=====================  ==========================================
combine_kernels        Eq. (10) first term, Eq. (13) ``sum_p w_p K_p``
init_graph_rows        Eqs. (25)-(28): initial Z and gamma (alpha = 0)
kernel_weights         Eqs. (11)-(12): closed-form kernel weights
kernel_alignment       delta_p = Tr(K_p Z^T) of Eq. (11), per row block
project_rows_simplex   Theorem 1 (Eq. 16): Euclidean projection on the simplex
graph_rows             Eqs. (13)-(16): one row block of the affinity graph Z
psd_factor             Theorem 2: K* = U max(Lambda, 0) U^T as a factor W W^T
objective              Eq. (10)
=====================  ==========================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh

__all__ = [
    "combine_kernels",
    "init_graph_rows",
    "kernel_weights",
    "kernel_alignment",
    "project_rows_simplex",
    "graph_rows",
    "psd_factor",
    "objective",
]

EPS = np.finfo(np.float64).eps


def combine_kernels(kernel_rows, weights):
    """Weighted sum of base-kernel rows, ``sum_p w_p K_p[rows, :]``.

    Parameters
    ----------
    kernel_rows : ndarray of shape (m, b, n)
        Rows ``b`` of the ``m`` base kernels.
    weights : ndarray of shape (m,)
        Kernel weights omega (dimensionless).

    Returns
    -------
    ndarray of shape (b, n)
        The combined kernel rows (first term of Eq. 13).
    """
    weights = np.asarray(weights, dtype=np.float64)
    return np.tensordot(weights, kernel_rows, axes=1)


def init_graph_rows(combined_rows, row_start, n_neighbors):
    """Initial affinity-graph rows and gamma, Eqs. (25)-(28) with alpha = 0.

    For each row i, ``e_i = -Kw[i, :]`` is sorted ascending with the sample itself
    first; the next ``c + 1`` values ``d_1 .. d_{c+1}`` give
    ``Z0[i, j_t] = (d_{c+1} - d_t) / (c d_{c+1} - sum_{t<=c} d_t + eps)`` and
    ``gamma_i = c/2 d_{c+1} - 1/2 sum_{t<=c} d_t`` (Eq. 27, the largest gamma_i for
    which row i has exactly c non-zeros).

    Parameters
    ----------
    combined_rows : ndarray of shape (b, n)
        Rows ``row_start .. row_start + b`` of ``sum_p omega0_p K_p``.
    row_start : int
        Index of the first row of the block in the full sample order.
    n_neighbors : int
        c, the number of neighbours, ``1 <= c <= n - 2``.

    Returns
    -------
    z_rows : scipy.sparse.csr_matrix of shape (b, n)
        Rows of Z0; each has ``c`` non-zeros summing to 1 and ``z_ii = 0``.
    gamma : ndarray of shape (b,)
        gamma_i of those rows (same units as the kernel values).
    """
    b, n = combined_rows.shape
    c = int(n_neighbors)
    e = -np.asarray(combined_rows, dtype=np.float64)
    rows = np.arange(b)
    # The sample itself ranks first (the reference skips the first sorted entry; a
    # normalised kernel has its maximum on the diagonal). Pinning it to -inf keeps
    # that true even for duplicate samples.
    e[rows, row_start + rows] = -np.inf
    # Only the c + 2 smallest are needed: partition, then sort that slice stably.
    part = np.argpartition(e, c + 1, axis=1)[:, : c + 2]
    vals = np.take_along_axis(e, part, axis=1)
    order = np.lexsort((part, vals), axis=1)
    idx = np.take_along_axis(part, order, axis=1)[:, 1:]
    d = np.take_along_axis(e, idx, axis=1)  # (b, c + 1)
    d_last = d[:, c]
    top_sum = d[:, :c].sum(axis=1)
    denom = c * d_last - top_sum + EPS
    z = (d_last[:, None] - d) / denom[:, None]
    gamma = 0.5 * c * d_last - 0.5 * top_sum
    z_rows = sp.csr_matrix((z[:, :c].ravel(), idx[:, :c].ravel(), np.arange(0, b * c + 1, c)), shape=(b, n))
    z_rows.sort_indices()
    return z_rows, gamma


def kernel_alignment(kernel_rows, z_rows):
    """Partial ``delta_p = Tr(K_p Z^T) = sum(K_p * Z)`` over a row block, Eq. (11).

    Parameters
    ----------
    kernel_rows : ndarray of shape (m, b, n)
    z_rows : ndarray or scipy.sparse matrix of shape (b, n)

    Returns
    -------
    ndarray of shape (m,)
        The block's contribution to delta_p; sum it over all blocks.
    """
    if sp.issparse(z_rows):
        z = z_rows.tocoo()
        return kernel_rows[:, z.row, z.col] @ z.data
    return np.einsum("pij,ij->p", kernel_rows, z_rows)


def kernel_weights(delta):
    """Closed-form kernel weights, Eq. (12): ``omega = delta / ||delta||_2``.

    Negative delta_p are kept, as the reference code does.

    Parameters
    ----------
    delta : ndarray of shape (m,)
        ``delta_p = Tr(K_p Z^T)`` summed over all rows.

    Returns
    -------
    ndarray of shape (m,)
        Kernel weights with unit Euclidean norm.

    Raises
    ------
    FloatingPointError
        If every delta_p is zero (Z is orthogonal to every kernel).
    """
    delta = np.asarray(delta, dtype=np.float64)
    norm = np.linalg.norm(delta)
    if not np.isfinite(norm) or norm == 0.0:
        raise FloatingPointError(f"kernel weights undefined: delta = {delta.tolist()}")
    return delta / norm


def _simplex_threshold(u_desc):
    """Threshold theta and support size rho from rows sorted in descending order."""
    b, n = u_desc.shape
    css = np.cumsum(np.where(np.isfinite(u_desc), u_desc, 0.0), axis=1) - 1.0
    with np.errstate(invalid="ignore"):
        rho = np.count_nonzero(u_desc - css / np.arange(1, n + 1) > 0, axis=1)
    return css[np.arange(b), rho - 1] / rho, rho


def project_rows_simplex(v, exclude=None, sparse=False, overwrite=False):
    """Euclidean projection of each row onto the probability simplex (Theorem 1).

    Solves ``min_z 1/2 ||z - v||^2`` s.t. ``z >= 0``, ``sum z = 1`` row by row,
    with entry ``exclude[i]`` of row i forced to 0 (``z_ii = 0``). The solution is
    ``z = max(v - theta, 0)`` (Eq. 16, theta = -beta_i); theta is found exactly from
    the sorted row, which equals the reference's Newton search on beta_i to
    round-off. Only the largest entries can be in the support, so rows are first
    partially sorted (top 128, then 1024 entries) and fully sorted only when the
    support is larger.

    Parameters
    ----------
    v : ndarray of shape (b, n)
        Rows to project (``z_hat``).
    exclude : ndarray of shape (b,) of int, optional
        Column forced to zero in each row (the sample itself).
    sparse : bool
        Return a CSR matrix holding only the support.
    overwrite : bool
        Allow ``v`` to be modified (saves a copy of a row block).

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix of shape (b, n)
        Projected rows, each non-negative and summing to 1.
    """
    v = np.asarray(v, dtype=np.float64)
    b, n = v.shape
    rows = np.arange(b)
    work = v if overwrite else v.copy()
    if exclude is not None:
        work[rows, exclude] = -np.inf
    theta = np.empty(b)
    todo = rows
    top = 128
    while todo.size:
        if top >= n:
            u = -np.sort(-work[todo], axis=1)
            theta[todo], _ = _simplex_threshold(u)
            break
        part = np.partition(work[todo], n - top, axis=1)[:, n - top :]
        u = -np.sort(-part, axis=1)
        th, rho = _simplex_threshold(u)
        ok = rho < top  # the (top+1)-th largest entry is <= the top-th <= theta
        theta[todo[ok]] = th[ok]
        todo = todo[~ok]
        top *= 8
    support = work > theta[:, None]
    if sparse:
        r, c = np.nonzero(support)
        z = sp.csr_matrix((work[r, c] - theta[r], (r, c)), shape=(b, n))
        z.sort_indices()
        return z
    return np.where(support, work - theta[:, None], 0.0)


def graph_rows(combined_rows, kstar_rows, gamma, alpha, row_start):
    """Rows of the affinity graph Z for fixed omega and K*, Eqs. (13)-(16).

    ``z_hat_i = (2 alpha K*[i, :] + sum_p omega_p K_p[i, :]) / (2 (alpha + gamma_i))``
    projected onto the simplex over ``j != i`` (Theorem 1).

    Parameters
    ----------
    combined_rows : ndarray of shape (b, n)
        ``sum_p omega_p K_p[rows, :]`` with the current weights.
    kstar_rows : ndarray of shape (b, n)
        ``K*_{t-1}[rows, :]``.
    gamma : ndarray of shape (b,)
        gamma_i of the rows (Eq. 27).
    alpha : float
        The balance hyper-parameter, ``alpha >= 0``.
    row_start : int
        Index of the first row of the block.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (b, n)
        Rows of Z; each is on the simplex with ``z_ii = 0``.
    """
    b, _ = combined_rows.shape
    gamma = np.asarray(gamma, dtype=np.float64)
    z_hat = np.multiply(kstar_rows, 2.0 * alpha)
    z_hat += combined_rows
    z_hat /= (2.0 * (alpha + gamma))[:, None]
    return project_rows_simplex(z_hat, exclude=row_start + np.arange(b), sparse=True, overwrite=True)


def _reflector_offsets(n):
    """Offsets of the packed Householder vectors of ``dsytrd`` (lower): column c keeps
    ``a[c+2:, c]`` (``n - c - 2`` entries, the unit entry at row c+1 implicit) at
    ``offsets[c]``; ``offsets[n - 1]`` is the total."""
    lengths = np.maximum(n - 2 - np.arange(max(n - 1, 0)), 0)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _pack_reflectors(a):
    """Move the Householder vectors of ``dsytrd(lower)`` to the front of ``a``'s buffer.

    Column c of the vectors (``a[c+2:, c]``) goes to ``flat[offsets[c]:offsets[c+1]]``
    of the Fortran-ordered buffer, column after column (a destination never passes an
    unread source), so the n^2 buffer is left holding ``n^2 / 2`` entries at its start
    and its tail can be released (:func:`_release_tail`). Returns the packed vectors
    (a view of the buffer's start) and their offsets.
    """
    n = a.shape[0]
    flat = a.reshape(-1, order="F")  # a view: a is Fortran-contiguous
    offsets = _reflector_offsets(n)
    for c in range(max(n - 2, 0)):
        src = c * n + c + 2
        flat[offsets[c] : offsets[c + 1]] = flat[src : src + n - c - 2]  # numpy handles the overlap
    return flat[: offsets[-1]], offsets


def _apply_q(packed, offsets, tau, x, block=128, panel=256):
    """``x <- Q x`` for ``Q = H_1 ... H_{n-1}`` of ``dsytrd(lower)`` (in place).

    The reflectors ``H_c = I - tau_c v_c v_c^T`` (packed by :func:`_pack_reflectors`)
    are applied ``block`` at a time in the compact WY form ``I - V T V^T`` (LAPACK
    ``dlarft``/``dlarfb``), on ``panel`` columns of ``x`` at a time so that no
    temporary exceeds ``n x panel``: the work of LAPACK ``dormtr`` (2 n^2 r flops),
    which needs the reflectors in the full n x n array.
    """
    n = x.shape[0]
    for j0 in range(((n - 2) // block) * block, -1, -block):
        j1 = min(j0 + block, n - 1)
        k = j1 - j0
        v = np.zeros((n - j0 - 1, k))
        for col, c in enumerate(range(j0, j1)):
            v[col, col] = 1.0
            v[col + 1 :, col] = packed[offsets[c] : offsets[c + 1]]
        g = v.T @ v
        t = np.zeros((k, k))
        for c in range(k):  # dlarft, forward and columnwise
            t[c, c] = tau[j0 + c]
            if c:
                t[:c, c] = -tau[j0 + c] * (t[:c, :c] @ g[:c, c])
        vt = np.ascontiguousarray(v.T)
        for p0 in range(0, x.shape[1], panel):
            xs = x[j0 + 1 :, p0 : p0 + panel]
            xs -= v @ (t @ (vt @ xs))
    return x


def _dense_buffer(n):
    """A zeroed n x n float64 array in Fortran order whose pages can be given back to the
    system before the array is freed (an anonymous memory map; see :func:`_release_tail`)."""
    import mmap

    buf = mmap.mmap(-1, max(8 * n * n, 1))
    return np.frombuffer(buf, dtype=np.float64, count=n * n).reshape((n, n), order="F")


def _release_tail(a, keep):
    """Give the pages of ``a``'s buffer after its first ``keep`` float64 entries back to the
    system (``madvise(MADV_DONTNEED)``: the resident memory drops now; the pages would
    read as zeros). Returns the bytes released (0 where not possible)."""
    import mmap

    owner = a.base
    while owner is not None and not isinstance(owner, mmap.mmap):
        owner = getattr(owner, "obj", None) if isinstance(owner, memoryview) else getattr(owner, "base", None)
    if owner is None or not hasattr(mmap, "MADV_DONTNEED"):
        return 0
    start = -(-8 * keep // mmap.PAGESIZE) * mmap.PAGESIZE
    length = len(owner) - start
    if length <= 0:
        return 0
    owner.madvise(mmap.MADV_DONTNEED, start, length)
    return length


class EigenvectorMemoryError(MemoryError):
    """The positive eigenvectors of S would not fit the memory left (see psd_factor)."""


def _mrrr_bytes(n, r, block=128, panel=256):
    """Peak bytes of the "mrrr" route after S's tail is released: the packed reflectors
    (``n^2 / 2``), the r eigenvectors, ``dstemr``'s workspace and the back-transformation's
    temporaries (two ``n x block`` copies of reflectors and an ``n x panel`` product)."""
    return 4 * n * n + 8 * n * r + 8 * n * (2 * block + panel) + 8 * 30 * n


def _positive_eigenpairs_mrrr(s, memory_left=None):
    """Positive eigenpairs of the symmetric ``s`` (Fortran order, overwritten).

    ``dsytrd`` in place; the Householder vectors are packed into the first half of S's
    buffer and the second half is given back to the system; the eigenpairs of the
    tridiagonal T with positive eigenvalue (counted by inertia) come from ``dstemr`` (multiple
    relatively robust representations: O(n) per eigenvector, no reorthogonalisation,
    written straight into the n x r result); then the blocked back-transformation
    :func:`_apply_q`. The peak is ``max(n^2, n^2 / 2 + n r) x 8`` bytes. LAPACK is
    called without the GIL (:mod:`lswmkc_dask._lapack`).

    Returns ``(lam, u, failed)``; ``failed`` is True when ``dstemr`` did not converge
    (``s`` is then destroyed and the caller must fall back).
    """
    from . import _lapack

    n = s.shape[0]
    d, e, tau = _lapack.dsytrd_lower(s)
    if n == 1:
        lam = d[d > 0].copy()
        return lam, np.ones((1, lam.size), order="F"), False
    columns = n - _lapack.negative_count(d, e)  # positive eigenvalues
    packed, offsets = _pack_reflectors(s)
    released = _release_tail(s, packed.size)
    resident = 8 * n * n - released  # S's buffer now, allocated since memory_left was measured
    for block, panel in ((128, 256), (64, 128), (32, 64)):
        need = _mrrr_bytes(n, columns, block, panel) - 4 * n * n
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
        lam = _lapack.dstemr_index(d, e, n - columns + 1, n, u)
    except np.linalg.LinAlgError:
        return None, None, True
    first = int(np.searchsorted(lam, 0.0, side="right"))  # a round-off zero counted positive
    lam, u = lam[first:], u[:, first:]  # the last columns of a Fortran array: a view
    _apply_q(packed, offsets, tau, u, block=block, panel=panel)
    return lam, u, False


#: The "lanczos" route gives way to "mrrr" when it would need more than this fraction
#: of n eigenpairs: ARPACK's cost grows like n k^2 and passes the dense route's n^3
#: between 5% and 6% of n at n = 2000 (benchmarks/README.md); the cap leaves room for a
#: rank hint that is too low.
LANCZOS_MAX_K = 0.12


def _sparse_s(z):
    """``S = (Z + Z^T) / 2`` as a CSR matrix from a sparse Z or its list of row blocks.

    Each entry is ``(a + b) * 0.5``, equal bit for bit to the dense :func:`symmetrised`
    (``a/2 + b/2``: halving is exact)."""
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
    would make results depend on what ran before. A start vector in the span of the
    previous K*'s eigenvectors gave the same time on Handwritten (0.24 s at rank 83),
    so none is passed between iterations.

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


def symmetrised(z_blocks):
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

    Returns
    -------
    ndarray of shape (n, n), Fortran order
        Lower triangle of S; zeros above the diagonal.

    Raises
    ------
    ValueError
        The blocks do not cover the n rows of Z.
    """
    n = z_blocks[0].shape[1]
    s = _dense_buffer(n)
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
#: Precisions of the eigendecomposition (``LSWMKC(eig_precision=...)``).
EIG_PRECISIONS = ("float64", "float32")
#: Where the gathered step's eigendecomposition runs (``LSWMKC(eig_device=...)``).
EIG_DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class EigenSpec:
    """How the gathered step computes the positive eigenpairs of S.

    Passed where an ``eig_driver`` string is accepted (:func:`lswmkc_dask.solver.iterate`);
    a plain string means ``EigenSpec(driver=string)``.

    Parameters
    ----------
    driver : {"auto", "mrrr", "subset", "evd", "lanczos"}
        The LAPACK route (CPU), see :func:`psd_factor`.
    precision : {"float64", "float32"}
        See :func:`psd_factor`.
    device : {"cpu", "cuda"}
        "cuda": the array-API route (:mod:`lswmkc_dask.gpu`) on a GPU; on a Dask
        cluster the gathered step is a task with ``resources={"GPU": 1}``. "auto" is
        resolved before the fit (:func:`lswmkc_dask.gpu.resolve_device`).
    """

    driver: str = "auto"
    precision: str = "float64"
    device: str = "cpu"


def eigen_spec(driver):
    """An :class:`EigenSpec` from an ``eig_driver`` string or spec."""
    return driver if isinstance(driver, EigenSpec) else EigenSpec(driver=driver)


def dense_lower_s(z):
    """The lower triangle of ``S = (Z + Z^T)/2``, dense in Fortran order, in a buffer whose
    pages the "mrrr" route can give back (:func:`_dense_buffer`).

    Parameters
    ----------
    z : ndarray or scipy.sparse matrix of shape (n, n), or list of sparse row blocks

    Returns
    -------
    ndarray of shape (n, n), float64, Fortran order
        Lower triangle of S; zeros above the diagonal.
    """
    if isinstance(z, (list, tuple)):
        return symmetrised(z)
    if sp.issparse(z):
        return symmetrised([sp.csr_matrix(z)])  # symmetrised while sparse: no dense transpose
    a = np.asarray(z, dtype=np.float64)
    s = _dense_buffer(a.shape[0])
    for j in range(a.shape[0]):  # the lower triangle only, as symmetrised() does
        np.add(a[j:, j], a[j, j:], out=s[j:, j])
        s[j:, j] *= 0.5
    return s


def _positive_eigenpairs_float32(z):
    """Positive eigenpairs of ``S = (Z + Z^T)/2``: float32 subspace, float64 Rayleigh-Ritz.

    1. S's lower triangle in float32 (the float64 S is freed first), and its eigenpairs
       above ``-100 eps_32 ||S||_inf`` by ``eigh(subset_by_value=...)`` (LAPACK
       ``ssyevr``): the margin keeps the eigenvectors of small positive eigenvalues that
       float32 round-off could push below 0.
    2. In float64: the basis V orthonormalised (QR), ``H = V^T S V`` with S applied as
       the sparse ``(Z + Z^T)/2`` (O(nnz r), no dense float64 S), ``H = Y diag(mu) Y^T``;
       the Ritz pairs ``(mu, V Y)`` with ``mu > 0`` are returned, ascending.

    The Ritz values are exact eigenvalues of S up to the float32 error of the subspace
    (a few 1e-7 relative): docs/algorithm.md gives the effect on the weights.
    Peak memory about ``n^2 x 8`` bytes (S's lower half in float64, then the float32
    S and the float32 eigenvectors SciPy allocates) plus ``3 n r x 8``.
    """
    s_sparse = _sparse_s(z)
    n = s_sparse.shape[0]
    norm = float(abs(s_sparse).sum(axis=1).max()) if s_sparse.nnz else 0.0
    if norm == 0.0:
        return np.zeros(0), np.zeros((n, 0), order="F")
    s32 = np.asfortranarray(dense_lower_s(z), dtype=np.float32)
    margin = 100.0 * float(np.finfo(np.float32).eps) * norm
    try:
        _, v = eigh(s32, lower=True, subset_by_value=(-margin, np.inf), overwrite_a=True, check_finite=False,
                    driver="evr")
    except ValueError:  # no eigenvalue in the interval
        return np.zeros(0), np.zeros((n, 0), order="F")
    del s32
    if v.shape[1] == 0:
        return np.zeros(0), np.zeros((n, 0), order="F")
    from scipy.linalg import qr

    q, _ = qr(np.asarray(v, dtype=np.float64), mode="economic", overwrite_a=True, check_finite=False)
    del v
    h = q.T @ (s_sparse @ q)
    h = 0.5 * (h + h.T)
    mu, y = eigh(h, check_finite=False)
    first = int(np.searchsorted(mu, 0.0, side="right"))
    return mu[first:].copy(), np.asfortranarray(q @ y[:, first:])


def psd_factor(z, *, driver="mrrr", memory_left=None, rank_hint=None, used=None, precision="float64"):
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
        does not converge. Crossovers measured on 2 cores: benchmarks/README.md.
    memory_left : int or callable, optional
        Bytes this process may still allocate, measured before S is built. With
        "mrrr", a MemoryError is raised before the eigenvectors are computed when the
        packed reflectors and their ``8 n r`` bytes (with workspace) exceed it. A
        callable is called with the dense route's name just before its dense S is
        built and returns the bytes then (a worker makes room there: the "lanczos"
        route needs little memory, its fallback to "mrrr" an n x n S).
    rank_hint : int, optional
        ("lanczos") the expected number of positive eigenvalues, e.g. the previous
        iteration's rank; default 5% of n.
    used : dict, optional
        Filled with ``{"driver": route}``, the route that gave the result (a fallback
        of "lanczos" or "mrrr" shows here; "float32-rr" for ``precision="float32"``).
    precision : {"float64", "float32"}
        "float64" (default) reproduces the reference. "float32": a dense route is
        replaced by the eigendecomposition of S in float32 (LAPACK ``ssyevr``, the
        eigenpairs above ``-100 eps_32 ||S||_inf``), refined in float64 on the subspace
        it returns (Rayleigh-Ritz, :func:`_positive_eigenpairs_float32`); "lanczos"
        stays float64.

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

    def dense_s():
        return dense_lower_s(z)

    if driver == "lanczos":
        lam, u = _positive_eigenpairs_lanczos(z, rank_hint)
        if lam is None:  # too many positive eigenvalues for Lanczos, or no convergence
            driver = "mrrr"
    if precision == "float32" and driver != "lanczos":
        lam, u = _positive_eigenpairs_float32(z)
        if used is not None:
            used["driver"] = "float32-rr"
        u *= np.sqrt(lam)
        return u, lam
    if driver == "mrrr":
        left = memory_left(driver) if callable(memory_left) else memory_left
        lam, u, failed = _positive_eigenpairs_mrrr(dense_s(), left)
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


def objective(weights, delta, gamma_sq_norm, z_fro_sq, kstar_sq, alpha):
    """The LSWMKC objective, Eq. (10), from per-iteration summaries.

    ``-sum_p omega_p Tr(K_p Z^T) + sum_i gamma_i ||Z_i||^2 + alpha ||K* - Z||_F^2``,
    where ``||K* - Z||_F^2 = ||Z||_F^2 - sum_{lambda>0} lambda^2`` because K* is the
    positive part of ``S = (Z + Z^T)/2`` (Theorem 2) and ``<K*, Z> = <K*, S>``.

    Parameters
    ----------
    weights : ndarray of shape (m,)
        omega used to compute this Z.
    delta : ndarray of shape (m,)
        ``Tr(K_p Z^T)`` of this Z.
    gamma_sq_norm : float
        ``sum_i gamma_i ||Z[i, :]||^2``.
    z_fro_sq : float
        ``||Z||_F^2``.
    kstar_sq : float
        ``||K*||_F^2 = sum_{lambda>0} lambda^2`` over the eigenvalues of S.
    alpha : float

    Returns
    -------
    float
    """
    gap = max(z_fro_sq - kstar_sq, 0.0)
    return float(-np.dot(weights, delta) + gamma_sq_norm + alpha * gap)
