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

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

import numpy as np

from ..core import equations as core
from ..errors import Param, ParameterError, with_message
from .scheduler import workers_of

__all__ = ["CUSOLVER_MAX_N", "EIGH_WORKSPACE", "GPU_MIN_N", "DeviceFallbackWarning", "DeviceUnavailableError",
           "cluster_gpu_workers", "cuda_device", "cuda_device_count", "device_bytes", "device_info", "device_refusal",
           "eigh_in_place", "memory_refusal", "positive_factor", "resolve_device", "solver_max_n", "synchronize"]

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

#: Test hook: a namespace name ("numpy") used in place of CuPy for eig_device="cuda".
_TEST_NAMESPACE = None
#: Test hook, with :data:`_TEST_NAMESPACE`: the devices this process sees (default 1).
_TEST_DEVICE_COUNT = None
#: Test hook, with :data:`_TEST_NAMESPACE`: ``(runtime_version, free_bytes, total_bytes)``
#: of the device (default: no limit at all).
_TEST_DEVICE_INFO = None


class DeviceUnavailableError(RuntimeError):
    """``eig_device="cuda"`` was asked for where no GPU can run the gathered step."""


class DeviceFallbackWarning(RuntimeWarning):
    """The GPU cannot take this n (memory, solver limit): the gathered step ran on the CPU."""


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


def device_bytes(n: int, dtype: Any = np.float64) -> int:
    """Device memory of the gathered step at n samples (bytes).

    Parameters
    ----------
    n : int
        Number of samples.
    dtype : numpy dtype, default float64
        Of S and its eigenvectors.

    Returns
    -------
    int
        S (whose buffer takes its eigenvectors) and the divide-and-conquer workspace
        (``syevd``, :data:`EIGH_WORKSPACE`): ``5 n^2`` items plus ``O(n)``.
    """
    item = np.dtype(dtype).itemsize
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
