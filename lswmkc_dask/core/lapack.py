"""LAPACK routines called through SciPy's Cython LAPACK function pointers.

SciPy's Python LAPACK wrappers hold the GIL for the whole call, and some allocate more
than the problem needs (``lapack.dstemr`` returns an n x n eigenvector array even for a
few columns). The same Fortran routines are exported, as C function pointers, by
:mod:`scipy.linalg.cython_lapack`; calling them through :mod:`ctypes` releases the GIL
(a Dask worker keeps answering its heartbeats during a minutes-long reduction) and lets
the output be written straight into a caller's array. Every argument is a pointer, as in
Fortran; the caller passes Fortran-ordered float64 (float32 for ``ssytrd``) / int32 arrays.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

_ptr = ctypes.c_void_p


@functools.cache
def _function(name, n_args):
    from scipy.linalg import cython_lapack

    capsule = cython_lapack.__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, get_name(capsule))
    return ctypes.CFUNCTYPE(None, *([_ptr] * n_args))(address)


def _int(value):
    return ctypes.c_int(int(value))


def _char(value):
    return ctypes.c_char(value.encode())


def _ref(x):
    return ctypes.byref(x)


def _data(a, dtype):
    if a.dtype != dtype or not (a.flags.f_contiguous or a.ndim == 1 and a.flags.c_contiguous):
        raise ValueError(f"LAPACK needs a Fortran-contiguous {np.dtype(dtype)} array, got {a.dtype}")
    return a.ctypes.data_as(_ptr)


def sytrd_lower(a):
    """Tridiagonal reduction ``Q^T A Q = T`` of the symmetric ``a`` in place (LAPACK ``dsytrd``
    for float64, ``ssytrd`` for float32; lower).

    Parameters
    ----------
    a : ndarray of shape (n, n), float64 or float32, Fortran order
        Only the lower triangle is read; on exit it holds the Householder vectors below
        the sub-diagonal (see :func:`apply_q`).

    Returns
    -------
    d : ndarray of shape (n,)
        Diagonal of T, in ``a``'s dtype.
    e : ndarray of shape (n - 1,)
        Sub-diagonal of T.
    tau : ndarray of shape (n - 1,)
        Scalar factors of the reflectors.

    Raises
    ------
    ValueError
        ``a`` is neither float64 nor float32, or not Fortran-contiguous.
    numpy.linalg.LinAlgError
        LAPACK reports an argument error (not expected for a valid array).
    """
    n = a.shape[0]
    dtype = np.dtype(a.dtype)
    if dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise ValueError(f"LAPACK sytrd needs a float64 or float32 array, got {dtype}")
    name = "dsytrd" if dtype == np.float64 else "ssytrd"
    f = _function(name, 10)
    d, e, tau = np.empty(n, dtype), np.empty(max(n - 1, 1), dtype), np.empty(max(n - 1, 1), dtype)
    info, lwork = ctypes.c_int(0), ctypes.c_int(-1)
    query = np.empty(1, dtype)
    lda = _int(max(n, 1))
    uplo, nn = _char("L"), _int(n)
    f(_ref(uplo), _ref(nn), _data(a, dtype), _ref(lda), _data(d, dtype), _data(e, dtype),
      _data(tau, dtype), _data(query, dtype), _ref(lwork), _ref(info))
    work = np.empty(max(int(query[0]), 1), dtype)
    lwork = _int(work.size)
    f(_ref(uplo), _ref(nn), _data(a, dtype), _ref(lda), _data(d, dtype), _data(e, dtype),
      _data(tau, dtype), _data(work, dtype), _ref(lwork), _ref(info))
    if info.value != 0:  # pragma: no cover - only on bad arguments
        raise np.linalg.LinAlgError(f"{name} failed (info = {info.value})")
    return d, e[: n - 1], tau[: n - 1]


def dstemr_index(d, e, il, iu, z):
    """Eigenpairs ``il..iu`` (1-based, ascending order) of the symmetric tridiagonal T
    (LAPACK ``dstemr``, multiple relatively robust representations).

    Parameters
    ----------
    d : ndarray of shape (n,)
        Diagonal of T (not modified).
    e : ndarray of shape (n - 1,)
        Sub-diagonal of T (not modified).
    il, iu : int
        The indices of the smallest and the largest eigenvalue wanted, ``1 <= il <= iu <= n``.
    z : ndarray of shape (n, iu - il + 1), float64, Fortran order
        Receives the eigenvectors.

    Returns
    -------
    w : ndarray of shape (iu - il + 1,)
        The eigenvalues, ascending.

    Raises
    ------
    ValueError
        ``z`` or the indices do not match T.
    numpy.linalg.LinAlgError
        ``dstemr`` did not converge (``info > 0``).
    """
    n = d.size
    k = iu - il + 1
    if not (1 <= il <= iu <= n) or z.shape != (n, k):
        raise ValueError(f"eigenpairs {il}..{iu} of a tridiagonal of order {n} need z of shape {(n, k)}, got {z.shape}")
    f = _function("dstemr", 21)
    dd = np.array(d, dtype=np.float64)  # overwritten by dstemr
    ee = np.zeros(n)  # length n: e(n) is workspace
    ee[: n - 1] = e
    w = np.empty(n)
    isuppz = np.empty(2 * n, dtype=np.int32)
    m, info = ctypes.c_int(0), ctypes.c_int(0)
    tryrac = ctypes.c_int(1)
    vl, vu = ctypes.c_double(0.0), ctypes.c_double(0.0)
    il_, iu_, nn, ldz, nzc = _int(il), _int(iu), _int(n), _int(n), _int(k)
    jobz, rng = _char("V"), _char("I")

    def call(work, lwork, iwork, liwork):
        f(_ref(jobz), _ref(rng), _ref(nn), _data(dd, np.float64), _data(ee, np.float64), _ref(vl), _ref(vu),
          _ref(il_), _ref(iu_), _ref(m), _data(w, np.float64), _data(z, np.float64), _ref(ldz), _ref(nzc),
          _data(isuppz, np.int32), _ref(tryrac), _data(work, np.float64), _ref(lwork), _data(iwork, np.int32),
          _ref(liwork), _ref(info))

    wq, iwq = np.empty(1), np.empty(1, dtype=np.int32)
    call(wq, _int(-1), iwq, _int(-1))
    if info.value != 0:  # pragma: no cover - only on bad arguments
        raise np.linalg.LinAlgError(f"dstemr workspace query failed (info = {info.value})")
    work, iwork = np.empty(max(int(wq[0]), 1)), np.empty(max(int(iwq[0]), 1), dtype=np.int32)
    call(work, _int(work.size), iwork, _int(iwork.size))
    if info.value != 0 or m.value != k:
        raise np.linalg.LinAlgError(f"dstemr did not converge (info = {info.value}, {m.value} of {k} eigenpairs)")
    return w[:k].copy()


def negative_count(d, e):
    """Number of eigenvalues of the symmetric tridiagonal T that are ``<= 0``, up to
    round-off at 0 (Sylvester's law of inertia: the negative pivots of the LDL^T
    factorisation of T, the Sturm count of LAPACK ``dlaneg`` at 0, with a zero pivot
    replaced by ``-pivmin`` as LAPACK does).
    """
    dl, el = d.tolist(), (np.asarray(e) ** 2).tolist()
    pivmin = np.finfo(np.float64).tiny * max(1.0, max(el, default=0.0))
    count, q = 0, 1.0
    for i, di in enumerate(dl):
        q = di - (el[i - 1] / q if i else 0.0)
        if abs(q) < pivmin:
            q = -pivmin
        if q < 0:
            count += 1
    return count


def reflector_offsets(n):
    """Offsets of the packed Householder vectors of ``dsytrd`` (lower): column c keeps
    ``a[c+2:, c]`` (``n - c - 2`` entries, the unit entry at row c+1 implicit) at
    ``offsets[c]``; ``offsets[n - 1]`` is the total.

    Parameters
    ----------
    n : int
        The order of the reduced matrix.

    Returns
    -------
    ndarray of shape (n,), int64
    """
    lengths = np.maximum(n - 2 - np.arange(max(n - 1, 0)), 0)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def pack_reflectors(a):
    """Move the Householder vectors of ``dsytrd(lower)`` to the front of ``a``'s buffer.

    Column c of the vectors (``a[c+2:, c]``) goes to ``flat[offsets[c]:offsets[c+1]]``
    of the Fortran-ordered buffer, column after column (a destination never passes an
    unread source), so the n^2 buffer is left holding ``n^2 / 2`` entries at its start
    and its tail can be released (``lswmkc_dask.core.eigen._release_tail``).

    Parameters
    ----------
    a : ndarray of shape (n, n), Fortran order
        As :func:`sytrd_lower` left it; overwritten.

    Returns
    -------
    packed : ndarray of shape (offsets[-1],)
        The vectors, a view of the buffer's start.
    offsets : ndarray of shape (n,), int64
        :func:`reflector_offsets`.
    """
    n = a.shape[0]
    flat = a.reshape(-1, order="F")  # a view: a is Fortran-contiguous
    offsets = reflector_offsets(n)
    for c in range(max(n - 2, 0)):
        src = c * n + c + 2
        flat[offsets[c] : offsets[c + 1]] = flat[src : src + n - c - 2]  # numpy handles the overlap
    return flat[: offsets[-1]], offsets


def apply_q(packed, offsets, tau, x, block=128, panel=256):
    """``x <- Q x`` for ``Q = H_1 ... H_{n-1}`` of ``dsytrd(lower)`` (in place).

    The reflectors ``H_c = I - tau_c v_c v_c^T`` (packed by :func:`pack_reflectors`)
    are applied ``block`` at a time in the compact WY form ``I - V T V^T`` (LAPACK
    ``dlarft``/``dlarfb``), on ``panel`` columns of ``x`` at a time so that no
    temporary exceeds ``n x panel``: the work of LAPACK ``dormtr`` (2 n^2 r flops),
    which needs the reflectors in the full n x n array. The arithmetic is in the dtype of
    ``packed`` (float64, or float32 for the float32 route) and ``x`` must have it.

    Parameters
    ----------
    packed, offsets : ndarray
        From :func:`pack_reflectors`.
    tau : ndarray of shape (n - 1,)
        From :func:`sytrd_lower`.
    x : ndarray of shape (n, k), Fortran order, ``packed``'s dtype
        Overwritten with ``Q x``.
    block, panel : int
        Reflectors per compact WY block, columns of ``x`` per product.

    Returns
    -------
    ndarray
        ``x``.
    """
    n = x.shape[0]
    dtype = packed.dtype
    for j0 in range(((n - 2) // block) * block, -1, -block):
        j1 = min(j0 + block, n - 1)
        k = j1 - j0
        v = np.zeros((n - j0 - 1, k), dtype)
        for col, c in enumerate(range(j0, j1)):
            v[col, col] = 1.0
            v[col + 1 :, col] = packed[offsets[c] : offsets[c + 1]]
        g = v.T @ v
        t = np.zeros((k, k), dtype)
        for c in range(k):  # dlarft, forward and columnwise
            t[c, c] = tau[j0 + c]
            if c:
                t[:c, c] = -tau[j0 + c] * (t[:c, :c] @ g[:c, c])
        vt = np.ascontiguousarray(v.T)
        for p0 in range(0, x.shape[1], panel):
            xs = x[j0 + 1 :, p0 : p0 + panel]
            xs -= v @ (t @ (vt @ xs))
    return x
