"""The gathered step on a GPU, written once against the array API.

:func:`positive_factor` computes the factor of K* (Theorem 2) with any array-API
namespace: CuPy on a GPU (``pip install 'lswmkc-dask[gpu]'``), NumPy in CI (the same
code, checked against the LAPACK route). S is built on the CPU from the sparse rows of Z
(O(nnz)), goes to the device once per iteration, and only the ``n x r`` factor comes
back.

``eig_device="auto"`` (:func:`resolve_device`) uses a GPU from :data:`GPU_MIN_N` samples
when the process or the cluster has one. That crossover is provisional: it has not been
measured (benchmarks/bench_gpu.py measures it on a machine with a GPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

import warnings

import numpy as np

from .errors import Param, ParameterError, with_message

__all__ = [
    "GPU_MIN_N",
    "CUSOLVER_MAX_N",
    "DeviceUnavailableError",
    "DeviceFallbackWarning",
    "cuda_device",
    "cluster_gpu_workers",
    "resolve_device",
    "device_bytes",
    "positive_factor",
]

#: "auto" takes the GPU from this n (provisional, not measured).
GPU_MIN_N = 4000
#: cuSOLVER's ``syevd`` through the 32-bit API fails its workspace query beyond about
#: n = 25,000 (NVIDIA CUDALibrarySamples issue 246): larger S go to the CPU.
CUSOLVER_MAX_N = 25000

#: Test hook: a namespace name ("numpy") used in place of CuPy for eig_device="cuda",
#: so that the routing of the gathered step can be tested on a machine without a GPU.
_TEST_NAMESPACE = None


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
        return False, "CuPy is not installed (pip install 'lswmkc-dask[gpu]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDA driver missing or broken
        return False, f"CUDA reports no usable device ({type(exc).__name__}: {exc})"
    if count < 1:
        return False, "CUDA reports no device"
    return True, ""


def cluster_gpu_workers(client: Client) -> list[str]:
    """Addresses of the workers of ``client``'s cluster that declare a ``GPU`` resource.

    Parameters
    ----------
    client : distributed.Client

    Returns
    -------
    list of str
    """
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
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
        "cpu" or "cuda". "auto": "cuda" when there is a device (a worker with a ``GPU``
        resource, or a CUDA device in this process) and ``n >= GPU_MIN_N``.

    Raises
    ------
    DeviceUnavailableError
        ``device="cuda"`` without a device: no worker declares ``GPU`` (start one with
        ``dask worker ADDRESS --resources GPU=1``, or dask-cuda with that resource), or
        this process has no CuPy or no CUDA device.
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
            "(pip install 'lswmkc-dask[gpu]'): {}", Param("eig_device", "cuda"), exc,
        ) from exc
    return xcp


def device_bytes(n: int) -> int:
    """Device memory of the gathered step at n samples (bytes): S, its eigenvectors and
    the divide-and-conquer workspace (``syevd``), about ``3 n^2 x 8`` plus ``O(n)``.
    """
    return 3 * 8 * n * n + 8 * 64 * n


def device_refusal(n, xp):
    """Why the device cannot take S at n samples ("" when it can): the solver's size
    limit (:data:`CUSOLVER_MAX_N`) or the free device memory against :func:`device_bytes`.
    """
    from array_api_compat import is_cupy_namespace

    if n > CUSOLVER_MAX_N:
        return (f"n = {n} is above {CUSOLVER_MAX_N}, where cuSOLVER's syevd (32-bit API) fails its "
                "workspace query")
    if not is_cupy_namespace(xp):
        return ""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    free, total = cupy.cuda.runtime.memGetInfo()
    need = device_bytes(n)
    if need > free:
        from dask.utils import format_bytes

        return (f"the eigendecomposition of S at n = {n} needs {format_bytes(need)} of GPU memory, "
                f"{format_bytes(free)} of {format_bytes(total)} are free")
    return ""


def _to_numpy(x):
    from array_api_compat import is_cupy_array

    if is_cupy_array(x):
        return x.get()
    try:
        return np.asarray(x)
    except (TypeError, ValueError):  # e.g. array-api-strict arrays
        return np.from_dlpack(x)


def positive_factor(s_lower: Any, xp: Any) -> tuple[np.ndarray, np.ndarray]:
    """``W = U_+ diag(sqrt(lambda_+))`` of S on the namespace ``xp`` (Theorem 2).

    Parameters
    ----------
    s_lower : ndarray of shape (n, n), float64
        Lower triangle of ``S = (Z + Z^T)/2`` on the host (zeros above the diagonal,
        :func:`lswmkc_dask._eigen.dense_lower_s`); copied to the device once.
    xp : array-API namespace
        e.g. ``array_api_compat.cupy`` or ``array_api_compat.numpy``.

    Returns
    -------
    factor : ndarray of shape (n, r), float64, Fortran order, on the host
    eigenvalues : ndarray of shape (r,)
        The positive eigenvalues, ascending.
    """
    s = xp.asarray(np.ascontiguousarray(s_lower))
    s = xp.tril(s) + xp.matrix_transpose(xp.tril(s, k=-1))
    lam, u = xp.linalg.eigh(s)
    del s
    order = xp.argsort(lam)
    lam = xp.take(lam, order)
    u = xp.take(u, order, axis=1)
    r = int(xp.sum(xp.astype(lam > 0, xp.int64)))
    n = lam.shape[0]
    lam = lam[n - r :]
    factor = u[:, n - r :] * xp.sqrt(lam)
    del u
    return np.asfortranarray(_to_numpy(factor)), _to_numpy(lam).copy()


def fallback_warning(message):
    """Warn that the gathered step ran on the CPU (:class:`DeviceFallbackWarning`)."""
    warnings.warn(message, DeviceFallbackWarning, stacklevel=3)
