"""The gathered step on a GPU, written once against the array API, and the device's limits.

:func:`positive_factor` computes the factor of K* (Theorem 2) with any array-API
namespace: CuPy on a GPU (``pip install '.[gpu]'``), NumPy in CI. S goes to the device
once per iteration and only the ``n x r`` factor comes back. ``eig_device="auto"``
(:func:`resolve_device`) takes a GPU from :data:`GPU_MIN_N` samples where the process or
the cluster has one. Beyond the device's limits (:func:`device_refusal`: cuSOLVER's size
limit before CUDA 13, the free memory) the step runs on the CPU with a
:class:`DeviceFallbackWarning` that gives the figures.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

import numpy as np

from ..core import equations as core
from ..core import lapack
from ..core.eigen import tridiagonal_positive_pairs
from ..errors import DeviceUnavailableError, Param, ParameterError, with_message
from .scheduler import workers_of

#: "auto" takes the GPU from this n. On one NVIDIA H200 against its 16 CPU cores
#: (benchmarks/bench_gpu.py) the whole fit on the GPU tied the CPU route at n = 165 (YALE:
#: 0.16 s against 0.14 s) and was 15 x faster at n = 2000 (Handwritten: 0.89 s against
#: 13.9 s); below 1000 the launches weigh as much as the work.
GPU_MIN_N = 1000
#: cuSOLVER's ``syevd`` through the 32-bit API of CUDA runtimes before 13 fails its
#: workspace query beyond about n = 25,000 (NVIDIA CUDALibrarySamples issue 246); CUDA 13
#: (64-bit API) has no such limit: :func:`solver_max_n`.
CUSOLVER_MAX_N = 25000
#: The first CUDA runtime without :data:`CUSOLVER_MAX_N` (``runtimeGetVersion()`` form).
CUDA_64BIT_SOLVER = 13000
#: cuSOLVER's ``syevd`` device workspace with eigenvectors, in n x n arrays of S's dtype: measured
#: 4.016, 4.006 and 4.003 n^2 float64 at n = 8000, 20,000 and 50,000 (``xsyevd_bufferSize``, CUDA
#: runtime 13.2, one H200, 2026-11-28). LAPACK's ``dsyevd`` asks for ``2 n^2 + 6 n + 1``.
EIGH_WORKSPACE = 4.0
#: The float64 eigen routes of a resident fit: "syevd" (the namespace's eigh; on CuPy
#: :func:`eigh_in_place`) and "split" (:func:`split_positive_factor`: sytrd and ormtr on the
#: device, the tridiagonal problem on the host for the eigenvalues > 0 only).
EIGEN_ROUTES = ("syevd", "split")
#: The split route's sytrd/ormtr exist in cuSOLVER's 32-bit API only: an n x n matrix past
#: 2**31 entries (n > 46,340) is refused until a workspace query and a check on a GPU show
#: that they take it (benchmarks/gpu_device_script.sh queries n = 46,341 and 60,000; not
#: measured yet).
SPLIT_MAX_N = 46340
#: The split route's device workspace beside S and the eigenvectors, counted as this many
#: n-vectors of float64 (sytrd's and ormtr's ``lwork`` are a few panels of n x 32-64:
#: NOT measured; benchmarks/gpu_device_script.sh queries them).
SPLIT_WORK_COLUMNS = 512

#: Test hook: a namespace name ("numpy") used in place of CuPy for eig_device="cuda".
_TEST_NAMESPACE = None
#: Test hook, with :data:`_TEST_NAMESPACE`: the devices this process sees (default 1).
_TEST_DEVICE_COUNT = None
#: Test hook, with :data:`_TEST_NAMESPACE`: ``(runtime_version, free_bytes, total_bytes)``
#: of the device (default: no limit at all).
_TEST_DEVICE_INFO = None


def cuda_device() -> tuple[bool, str]:
    """Whether this process can use a CUDA device through CuPy.

    Returns
    -------
    ok : bool
    reason : str
        Why not (empty when ``ok``).
    """
    if _TEST_NAMESPACE is not None:
        return True, ""
    try:
        import cupy
    except ImportError:
        return False, "CuPy is not installed (pip install '.[gpu]' in the lswmkc-dask checkout)"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDA driver missing or broken
        return False, f"CUDA reports no usable device ({type(exc).__name__}: {exc})"
    if count < 1:
        return False, "CUDA reports no device"
    return True, ""


def cuda_device_count() -> int:
    """The number of CUDA devices this process can use through CuPy (0 without one).

    Returns
    -------
    int
        0 where :func:`cuda_device` says no; honours ``CUDA_VISIBLE_DEVICES``.
    """
    if _TEST_NAMESPACE is not None:
        return 1 if _TEST_DEVICE_COUNT is None else int(_TEST_DEVICE_COUNT)
    ok, _ = cuda_device()
    if not ok:
        return 0
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


def cluster_gpu_workers(client: Client) -> list[str]:
    """Addresses of the workers of ``client``'s cluster that declare a ``GPU`` resource.

    Parameters
    ----------
    client : distributed.Client

    Returns
    -------
    list of str
    """
    workers = workers_of(client)
    return sorted(a for a, w in workers.items() if (w.get("resources") or {}).get("GPU", 0) >= 1)


def resolve_device(device: str, n: int, client: Client | None = None) -> str:
    """Where the gathered step runs: "cpu" or "cuda".

    Parameters
    ----------
    device : {"cpu", "cuda", "auto"}
    n : int
        Number of samples.
    client : distributed.Client, optional
        The fit's cluster; None for a fit in this process.

    Returns
    -------
    str
        "cpu" or "cuda". "auto": "cuda" where there is a device (a worker with a ``GPU``
        resource, or a CUDA device in this process) and ``n >= GPU_MIN_N``.

    Raises
    ------
    DeviceUnavailableError
        ``device="cuda"`` without a device: no worker declares ``GPU``, or this process
        has no CuPy or no CUDA device (the message says what to start or install).
    ValueError
        Unknown ``device``.
    """
    if device not in ("cpu", "cuda", "auto"):
        raise ParameterError("{} must be 'cpu', 'cuda' or 'auto', got {!r}", Param("eig_device"), device)
    if device == "cpu":
        return "cpu"
    if client is not None:
        ok = bool(cluster_gpu_workers(client))
        reason = ("no worker of the Dask cluster declares a GPU resource: start GPU workers with "
                  "'dask worker ADDRESS --resources GPU=1' (or dask-cuda with --resources GPU=1)")
    else:
        ok, reason = cuda_device()
    if device == "cuda":
        if not ok:
            raise with_message(DeviceUnavailableError, "{} cannot run: {}; use {} or 'auto'",
                               Param("eig_device", "cuda"), reason, Param("eig_device", "cpu"))
        return "cuda"
    return "cuda" if ok and n >= GPU_MIN_N else "cpu"


def namespace(device):
    """The array-API namespace of ``device`` ("cuda": CuPy; "numpy": NumPy)."""
    from array_api_compat import numpy as xnp

    if device == "numpy":
        return xnp
    if _TEST_NAMESPACE is not None:
        return xnp if _TEST_NAMESPACE == "numpy" else __import__(_TEST_NAMESPACE)
    try:
        from array_api_compat import cupy as xcp
    except ImportError as exc:
        raise with_message(
            DeviceUnavailableError, "{} needs CuPy and array-api-compat on the machine that runs the gathered step "
            "(pip install '.[gpu]' in the lswmkc-dask checkout): {}", Param("eig_device", "cuda"), exc,
        ) from exc
    return xcp


def device_bytes(n: int, dtype: Any = np.float64, route: str = "syevd", rank_fraction: float = 1.0) -> int:
    """Device memory of the eigen step at n samples (bytes).

    Parameters
    ----------
    n : int
        Number of samples.
    dtype : numpy dtype, default float64
        Of S and its eigenvectors.
    route : {"syevd", "split"}
        :data:`EIGEN_ROUTES`.
    rank_fraction : float, default 1.0
        ("split") K*'s rank r as a fraction of n (1: counted as n, as a plan before any
        iteration must).

    Returns
    -------
    int
        "syevd": S (whose buffer takes its eigenvectors) and the divide-and-conquer workspace
        (:data:`EIGH_WORKSPACE`): ``5 n^2`` items plus ``O(n)``. "split": S (its buffer takes
        the reflectors), the r positive eigenvectors and :data:`SPLIT_WORK_COLUMNS` n-vectors.

    Raises
    ------
    ValueError
        Unknown ``route``.
    """
    item = np.dtype(dtype).itemsize
    if route == "split":
        return int(item * n * n + item * n * math.ceil(rank_fraction * n)) + item * (SPLIT_WORK_COLUMNS + 3) * n
    if route != "syevd":
        raise ValueError(f"route must be one of {', '.join(map(repr, EIGEN_ROUTES))}, got {route!r}")
    return int((1 + EIGH_WORKSPACE) * item * n * n) + item * 64 * n


def solver_max_n(runtime_version: int | None) -> int | None:
    """The largest n cuSOLVER's eigendecomposition takes on a CUDA runtime.

    Parameters
    ----------
    runtime_version : int or None
        As ``cupy.cuda.runtime.runtimeGetVersion()`` gives it (1000 x major + 10 x
        minor: 12080 for CUDA 12.8, 13000 for 13.0); None: unknown (no limit).

    Returns
    -------
    int or None
        :data:`CUSOLVER_MAX_N` before CUDA 13 (32-bit API), None (no limit) from 13 on.
    """
    if runtime_version is not None and int(runtime_version) < CUDA_64BIT_SOLVER:
        return CUSOLVER_MAX_N
    return None


def memory_refusal(n: int, free_bytes: int | None, total_bytes: int | None = None, dtype: Any = np.float64, *,
                   need: int | None = None, what: str | None = None) -> str:
    """Why the device's free memory cannot take the gathered step at n ("" when it can).

    Parameters
    ----------
    n : int
        Number of samples.
    free_bytes : int or None
        Free device memory (``cupy.cuda.Device().mem_info[0]``); None: unknown.
    total_bytes : int, optional
        The device's memory, named in the message.
    dtype : numpy dtype, default float64
    need, what : optional
        Bytes and name of another need than :func:`device_bytes`'s (the resident fit's).

    Returns
    -------
    str
        The figures, needed against free; "" where it fits.
    """
    need = device_bytes(n, dtype) if need is None else need
    if free_bytes is None or need <= free_bytes:
        return ""
    from dask.utils import format_bytes

    of = f" of {format_bytes(int(total_bytes))}" if total_bytes else ""
    return (f"{what or f'the eigendecomposition of S at n = {n}'} needs {format_bytes(need)} of GPU memory, "
            f"{format_bytes(int(free_bytes))}{of} are free")


def device_info(xp: Any) -> tuple[int | None, int | None, int | None]:
    """``(runtime_version, free_bytes, total_bytes)`` of the current device of ``xp``.

    CuPy: the runtime's version and ``mem_info`` after the memory pool gave its cached
    blocks back; another namespace: :data:`_TEST_DEVICE_INFO`, else ``(None, None, None)``.
    """
    from array_api_compat import is_cupy_namespace

    if not is_cupy_namespace(xp):
        return _TEST_DEVICE_INFO if _TEST_DEVICE_INFO is not None else (None, None, None)
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    free, total = cupy.cuda.Device().mem_info
    return int(cupy.cuda.runtime.runtimeGetVersion()), int(free), int(total)


def device_refusal(n: int, xp: Any, dtype: Any = np.float64) -> str:
    """Why the device cannot take S at n samples ("" when it can).

    Parameters
    ----------
    n : int
    xp : array-API namespace
        Of the device (:func:`namespace`).
    dtype : numpy dtype, default float64

    Returns
    -------
    str
        The solver's size limit of the device's CUDA runtime (:func:`solver_max_n`), or
        the memory the step needs against the device's free memory
        (:func:`memory_refusal`); "" when neither refuses.
    """
    runtime, free, total = device_info(xp)
    limit = solver_max_n(runtime)
    if limit is not None and n > limit:
        major, minor = divmod(int(runtime or 0), 1000)
        return (f"n = {n} is above {limit}, where cuSOLVER's syevd (32-bit API of the CUDA {major}.{minor // 10} "
                "runtime) fails its workspace query; CUDA 13 has no such limit (pip install "
                "'.[gpu-cuda13]' in the lswmkc-dask checkout, with a driver for CUDA 13)")
    return memory_refusal(n, free, total, dtype)


def synchronize(xp: Any) -> None:
    """Wait for the work queued on ``xp``'s current device (CuPy; nothing to wait for elsewhere),
    so that a stage's wall time includes its device work.
    """
    from array_api_compat import is_cupy_namespace

    if is_cupy_namespace(xp):
        import cupy

        cupy.cuda.Device().synchronize()


def _to_numpy(x):
    from array_api_compat import is_cupy_array

    if is_cupy_array(x):
        return x.get()
    try:
        return np.asarray(x)
    except (TypeError, ValueError):  # e.g. array-api-strict arrays
        return np.from_dlpack(x)


def positive_factor(s_lower: Any, xp: Any) -> tuple[np.ndarray, np.ndarray]:
    """``W = U_+ diag(sqrt(lambda_+))`` of S on the namespace ``xp``, from and to the host (Theorem 2).

    The lower triangle of S goes to the device once and is made symmetric there;
    :func:`lswmkc_dask.core.positive_factor` keeps its positive eigenpairs.

    Parameters
    ----------
    s_lower : ndarray of shape (n, n), float64
        Lower triangle of ``S = (Z + Z^T)/2`` on the host (zeros above the diagonal,
        :func:`lswmkc_dask.core.eigen.dense_lower_s`); copied to the device once.
    xp : array-API namespace
        e.g. ``array_api_compat.cupy`` or ``array_api_compat.numpy``.

    Returns
    -------
    factor : ndarray of shape (n, r), float64, Fortran order, on the host
    eigenvalues : ndarray of shape (r,)
        The positive eigenvalues, ascending.
    """
    factor, lam = core.positive_factor(_symmetric(xp.asarray(np.ascontiguousarray(s_lower)), xp), xp,
                                       eigh=eigh_in_place)
    return np.asfortranarray(_to_numpy(factor)), _to_numpy(lam).copy()


def eigh_in_place(s: Any) -> tuple[Any, Any]:
    """``eigh`` of a symmetric S that may be destroyed: on CuPy, cuSOLVER's syevd writes the
    eigenvectors into S's own buffer.

    The calls of CuPy's ``eigh`` (cuSOLVER's 64-bit ``xsyevd``) less its copy of S: one
    n x n array less at the eigen step's peak, the same numbers. Elsewhere (another
    namespace, dtype or layout) the namespace's ``eigh``.

    Parameters
    ----------
    s : array of shape (n, n), float64, C-contiguous
        Exactly symmetric S (``S^T``, Fortran-ordered, is handed to cuSOLVER); overwritten
        on CuPy.

    Returns
    -------
    eigenvalues : array of shape (n,)
        Ascending.
    eigenvectors : array of shape (n, n)
        In S's buffer on CuPy (columns, ``eigenvectors[:, i]`` for ``eigenvalues[i]``).

    Raises
    ------
    numpy.linalg.LinAlgError
        cuSOLVER reports that the decomposition did not converge.
    """
    from array_api_compat import array_namespace, is_cupy_array

    if not (is_cupy_array(s) and s.dtype == np.float64 and s.ndim == 2 and s.flags.c_contiguous):
        return array_namespace(s).linalg.eigh(s)
    import cupy
    from cupy_backends.cuda.libs import cublas, cusolver

    a, n = s.T, int(s.shape[0])  # S^T = S, Fortran-ordered: cuSOLVER's layout, no copy
    w, info = cupy.empty(n, dtype=cupy.float64), cupy.zeros((), dtype=cupy.int32)
    handle, f64 = cupy.cuda.Device().cusolver_handle, cupy.cuda.runtime.CUDA_R_64F
    mode, lower = cusolver.CUSOLVER_EIG_MODE_VECTOR, cublas.CUBLAS_FILL_MODE_LOWER
    params = cusolver.createParams()
    try:
        on_device, on_host = cusolver.xsyevd_bufferSize(handle, params, mode, lower, n, f64, a.data.ptr, n, f64,
                                                        w.data.ptr, f64)
        work, host_work = cupy.empty(on_device, dtype=cupy.int8), np.empty(on_host, dtype=np.int8)
        cusolver.xsyevd(handle, params, mode, lower, n, f64, a.data.ptr, n, f64, w.data.ptr, f64, work.data.ptr,
                        on_device, host_work.ctypes.data, on_host, info.data.ptr)
    finally:
        cusolver.destroyParams(params)
    if int(info) != 0:
        raise np.linalg.LinAlgError(f"cuSOLVER's syevd did not converge at n = {n} (info = {int(info)})")
    return w, a


def _symmetric(lower, xp):
    """The symmetric matrix whose lower triangle is ``lower``'s."""
    return xp.tril(lower) + xp.matrix_transpose(xp.tril(lower, k=-1))


def _cusolver():
    """The cuSOLVER library this process loaded with CuPy, through ctypes (its 32-bit ``Dsytrd``/``Dormtr``)."""
    import ctypes

    import cupy
    from cupy_backends.cuda.libs import cusolver  # noqa: F401 - loads libcusolver

    cupy.cuda.Device().cusolver_handle  # noqa: B018 - the library is mapped from here on
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "libcusolver.so" in line})
    if not paths:
        raise DeviceUnavailableError("the split eigen route needs cuSOLVER's library: this process has not loaded it")
    lib = ctypes.CDLL(paths[0])
    for name in ("cusolverDnDsytrd_bufferSize", "cusolverDnDsytrd", "cusolverDnDormtr_bufferSize", "cusolverDnDormtr"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _check(status, what):
    if int(status) != 0:
        raise np.linalg.LinAlgError(f"cuSOLVER's {what} failed (status {int(status)})")


class _CusolverSplit:
    """sytrd and ormtr of cuSOLVER (lower, 32-bit API) on S's own buffer (S^T = S, Fortran-ordered)."""

    def __init__(self):
        import ctypes

        import cupy

        self.lib, self.c, self.cupy = _cusolver(), ctypes, cupy
        self.handle = ctypes.c_void_p(int(cupy.cuda.Device().cusolver_handle))

    def _p(self, a):
        return self.c.c_void_p(int(a.data.ptr))

    def reduce(self, s):
        cp, c, n = self.cupy, self.c, int(s.shape[0])
        a = s.T  # Fortran-ordered, no copy
        d, e, tau = cp.empty(n), cp.empty(max(n - 1, 1)), cp.empty(max(n - 1, 1))
        lwork, info = c.c_int(0), cp.zeros((), dtype=cp.int32)
        args = (self.handle, c.c_int(0), c.c_int(n), self._p(a), c.c_int(n), self._p(d), self._p(e), self._p(tau))
        _check(self.lib.cusolverDnDsytrd_bufferSize(*args, c.byref(lwork)), "sytrd workspace query")
        work = cp.empty(max(lwork.value, 1))
        _check(self.lib.cusolverDnDsytrd(*args, self._p(work), c.c_int(lwork.value), self._p(info)), "sytrd")
        if int(info) != 0:
            raise np.linalg.LinAlgError(f"cuSOLVER's sytrd failed at n = {n} (info = {int(info)})")
        return a, d, e[: n - 1], tau[: n - 1]

    def apply_q(self, a, tau, u):
        cp, c = self.cupy, self.c
        n, r = int(u.shape[0]), int(u.shape[1])
        if r == 0 or n == 1:
            return u
        u = cp.asfortranarray(u)
        lwork, info = c.c_int(0), cp.zeros((), dtype=cp.int32)
        args = (self.handle, c.c_int(0), c.c_int(0), c.c_int(0), c.c_int(n), c.c_int(r), self._p(a), c.c_int(n),
                self._p(tau), self._p(u), c.c_int(n))
        _check(self.lib.cusolverDnDormtr_bufferSize(*args, c.byref(lwork)), "ormtr workspace query")
        work = cp.empty(max(lwork.value, 1))
        _check(self.lib.cusolverDnDormtr(*args, self._p(work), c.c_int(lwork.value), self._p(info)), "ormtr")
        if int(info) != 0:
            raise np.linalg.LinAlgError(f"cuSOLVER's ormtr failed at n = {n} (info = {int(info)})")
        return u


class _LapackSplit:
    """sytrd and the blocked back-transformation of the CPU "mrrr" route (NumPy: the device is the host)."""

    def reduce(self, s):
        a = s.T  # Fortran-ordered
        d, e, tau = lapack.sytrd_lower(a)
        return lapack.pack_reflectors(a), d, e, tau

    def apply_q(self, reflectors, tau, u):
        (packed, offsets), u = reflectors, np.asfortranarray(u)
        lapack.apply_q(packed, offsets, tau, u)
        return u


#: Test hook: the split route's device part for a namespace with no sytrd (array-api-strict).
_TEST_SPLIT_BACKEND = None


def _split_backend(s, xp):
    from array_api_compat import is_cupy_namespace, is_numpy_namespace

    if is_cupy_namespace(xp):
        return _CusolverSplit()
    if is_numpy_namespace(xp):
        return _LapackSplit()
    if _TEST_SPLIT_BACKEND is not None:
        return _TEST_SPLIT_BACKEND
    raise DeviceUnavailableError(f"the split eigen route has no sytrd/ormtr on {xp.__name__}: use eigen='syevd'")


def split_positive_factor(s: Any, link: Any, threads: int = 1) -> tuple[Any, Any]:
    """``W = U_+ diag(sqrt(lambda_+))`` of S by the memory-lean split route (Theorem 2).

    The tridiagonal reduction ``S = Q T Q^T`` on the device (cuSOLVER's ``Dsytrd`` on CuPy,
    LAPACK's ``dsytrd`` on NumPy) in S's buffer; T's two diagonals (O(n)) to the host, where
    the eigenpairs of T with eigenvalue > 0 are computed (:func:`lswmkc_dask.core.eigen.tridiagonal_positive_pairs`,
    ``dstemr``, O(n) workspace); T's r eigenvectors (n x r) to the device and ``U_+ = Q U_T``
    there (``Dormtr``; on NumPy the CPU "mrrr" route's blocked back-transformation). Device
    memory :func:`device_bytes` ``(route="split")``: no n x n eigenvector array, no syevd workspace.

    Parameters
    ----------
    s : array of shape (n, n), float64, C-contiguous, exactly symmetric
        S on the device; overwritten (it holds the reflectors).
    link : lswmkc_dask.engine.device_fit.Link
        The device; T's diagonals ("tridiagonal") and eigenvectors ("tridiagonal
        eigenvectors", "eigenvalues") cross through it.
    threads : int
        Host threads of ``dstemr``'s index ranges.

    Returns
    -------
    factor : array of shape (n, r), float64, on the device
    eigenvalues : array of shape (r,), ascending, on the device

    Raises
    ------
    DeviceUnavailableError
        A namespace without sytrd/ormtr (array-api-strict).
    numpy.linalg.LinAlgError
        cuSOLVER or ``dstemr`` reports a failure.
    """
    xp = link.xp
    backend = _split_backend(s, xp)
    reflectors, d, e, tau = backend.reduce(s)
    del s
    lam_h, u_h = tridiagonal_positive_pairs(link.to_host(d, "tridiagonal"), link.to_host(e, "tridiagonal"), threads)
    u = backend.apply_q(reflectors, tau, link.to_device(u_h, "tridiagonal eigenvectors"))
    del reflectors, u_h
    lam = link.to_device(lam_h, "eigenvalues")
    u *= xp.sqrt(lam)[None, :]
    return u, lam


def workspace_query(n: int) -> dict[str, Any]:
    """The device workspace of cuSOLVER at n (bytes), asked without an n x n array: ``xsyevd``
    (64-bit API, eigenvectors) and the split route's ``Dsytrd`` and ``Dormtr`` (32-bit API,
    r = n / 2 columns); an entry that fails holds the error's text.

    Parameters
    ----------
    n : int

    Returns
    -------
    dict
        ``n``, ``xsyevd_bytes``, ``sytrd_bytes``, ``ormtr_bytes`` (int or str), and each
        one in n^2 float64 (``*_n2``) where it is a number.

    Raises
    ------
    DeviceUnavailableError
        No CuPy or no CUDA device.
    """
    import ctypes

    xp = namespace("cuda")
    import cupy
    from cupy_backends.cuda.libs import cublas, cusolver

    tiny = cupy.empty(8)
    ptr, handle = int(tiny.data.ptr), cupy.cuda.Device().cusolver_handle
    out: dict[str, Any] = {"n": int(n), "namespace": xp.__name__}
    try:
        params = cusolver.createParams()
        try:
            f64 = cupy.cuda.runtime.CUDA_R_64F
            dev, _ = cusolver.xsyevd_bufferSize(handle, params, cusolver.CUSOLVER_EIG_MODE_VECTOR,
                                                cublas.CUBLAS_FILL_MODE_LOWER, n, f64, ptr, n, f64, ptr, f64)
        finally:
            cusolver.destroyParams(params)
        out["xsyevd_bytes"] = int(dev)
    except Exception as exc:  # noqa: BLE001 - recorded, the other queries still asked
        out["xsyevd_bytes"] = f"{type(exc).__name__}: {exc}"
    lib, h, p, i = _cusolver(), ctypes.c_void_p(int(handle)), ctypes.c_void_p(ptr), ctypes.c_int
    for name, args in (("sytrd", (h, i(0), i(n), p, i(n), p, p, p)),
                       ("ormtr", (h, i(0), i(0), i(0), i(n), i(max(n // 2, 1)), p, i(n), p, p, i(n)))):
        lwork = ctypes.c_int(0)
        status = getattr(lib, f"cusolverDnD{name}_bufferSize")(*args, ctypes.byref(lwork))
        out[f"{name}_bytes"] = 8 * lwork.value if status == 0 and lwork.value >= 0 else f"status {status}"
    for key in ("xsyevd", "sytrd", "ormtr"):
        if isinstance(out[f"{key}_bytes"], int):
            out[f"{key}_n2"] = out[f"{key}_bytes"] / (8.0 * n * n)
    return out


def stream_rows(read: Any, blocks: list[tuple[int, int]], link: Any, dtype: Any) -> Any:
    """The row blocks of a kernel stack in host memory, copied to the device one after another.

    On CuPy each block is staged in pinned host memory (two buffers) and copied on a
    stream of its own, the next block's copy issued before the current block is handed
    out, so that it overlaps the current block's work; elsewhere a plain copy per block.
    Every copy is recorded on ``link`` as "kernel rows".

    Parameters
    ----------
    read : callable
        ``read(start, stop)`` gives rows ``start:stop`` of every kernel, (m, b, n), on the host.
    blocks : list of (int, int)
    link : lswmkc_dask.engine.device_fit.Link
    dtype : dtype of ``link.xp``
        The device rows' dtype (the stack's).

    Returns
    -------
    iterator of (start, stop, rows on the device)
    """
    from array_api_compat import is_cupy_namespace

    if not is_cupy_namespace(link.xp):
        for start, stop in blocks:
            yield start, stop, link.to_device(read(start, stop), "kernel rows", dtype=dtype)
        return
    yield from _stream_pinned(read, blocks, link)


def _stream_pinned(read, blocks, link):
    """:func:`stream_rows` on CuPy: two pinned buffers, a copy stream, the next block in flight."""
    import cupy
    import cupyx

    compute, copier = cupy.cuda.get_current_stream(), cupy.cuda.Stream(non_blocking=True)
    staged: list[Any] = [None, None]
    done: list[Any] = [None, None]

    def issue(i):
        start, stop = blocks[i]
        host = np.ascontiguousarray(read(start, stop))
        slot = i % 2
        if done[slot] is not None:
            done[slot].synchronize()  # the buffer's previous copy has left it
        if staged[slot] is None or staged[slot].size < host.size or staged[slot].dtype != host.dtype:
            staged[slot] = cupyx.empty_pinned(host.size, dtype=host.dtype)
        buf = staged[slot][: host.size].reshape(host.shape)
        np.copyto(buf, host)
        rows = cupy.empty(host.shape, dtype=host.dtype)
        copier.wait_event(compute.record())  # the block's memory is free on the compute stream
        rows.set(buf, stream=copier)
        done[slot] = copier.record()
        link.record("to_device", "kernel rows", host.nbytes)
        return start, stop, rows, done[slot]

    nxt = issue(0) if blocks else None
    for i in range(len(blocks)):
        start, stop, rows, ready = nxt  # type: ignore[misc]
        nxt = issue(i + 1) if i + 1 < len(blocks) else None
        compute.wait_event(ready)
        yield start, stop, rows
