"""The training statistics a kernel store keeps for ``LSWMKC.predict``, read and checked.

``prepare`` writes them beside ``kernels`` (docs/algorithm.md section 8): one array
:data:`STATISTICS` of shape (2, m, n) float64, the raw column means d and the centred
diagonal with the jitter of each kept kernel, with the attributes ``kernel_index`` (the
position of each kept kernel among the input kernels) and ``n_kernels_in``; their sha256
goes into the manifest. :func:`read_statistics` is what opening them for a fit and
``lswmkc verify`` check.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import zarr

__all__ = ["STATISTICS", "read_statistics", "statistics_sha256"]

#: The array beside ``kernels`` that holds the training statistics of the kept kernels.
#: Stores prepared by earlier versions have none.
STATISTICS = "statistics"


def statistics_sha256(stack: np.ndarray) -> str:
    """The sha256 of the statistics' little-endian float64 bytes (the manifest's ``statistics_sha256``).

    Parameters
    ----------
    stack : ndarray of shape (2, m, n)

    Returns
    -------
    str
    """
    return hashlib.sha256(np.ascontiguousarray(stack, dtype="<f8").tobytes()).hexdigest()


def _value_problem(name, stack, index, m_in):
    """What is wrong with readable statistics of the right shape (None: nothing)."""
    bad = ~np.isfinite(stack)
    if bad.any():
        part, p, j = (int(i) for i in np.argwhere(bad)[0])
        return (f"{name} hold {int(bad.sum())} NaN/Inf values (the first: the {('column mean', 'diagonal')[part]} "
                f"of kernel {p} at sample {j})")
    if not np.all(stack[1] > 0):
        p, j = (int(i) for i in np.argwhere(~(stack[1] > 0))[0])
        return f"{name} have a centred diagonal of {stack[1, p, j]:.3g} in kernel {p} at sample {j}, not above 0"
    if m_in < index.size or index.size and (index[0] < 0 or index[-1] >= m_in or np.any(np.diff(index) <= 0)):
        return (f"{name} have kernel_index {index.tolist()}, not increasing positions among the {m_in} input "
                "kernels (n_kernels_in)")
    return None


def read_statistics(location: Any, n_kernels: int, n_samples: int, attrs: dict) -> tuple[tuple | None, str | None]:
    """The training statistics of a store and what is wrong with them.

    Parameters
    ----------
    location : str or zarr store
    n_kernels, n_samples : int
        m and n of the store's kernels.
    attrs : dict
        The store's group attributes (the manifest holds the statistics' sha256).

    Returns
    -------
    statistics : tuple or None
        ``(col_means, diag, kernel_index, n_kernels_in)``; None when absent (a store
        prepared by an earlier version) or damaged.
    problem : str or None
        Unreadable, their shape, NaN/Inf, a centred diagonal not above 0, a
        ``kernel_index`` that is not increasing positions among ``n_kernels_in``, a
        sha256 that is not the manifest's.
    """
    group = zarr.open_group(location, mode="r")
    if STATISTICS not in group:
        return None, None
    name = f"its training statistics ({STATISTICS!r})"
    try:
        arr = group[STATISTICS]
        if not isinstance(arr, zarr.Array):
            raise TypeError(f"{STATISTICS!r} is a group, not an array")
        stack = np.asarray(arr[...], dtype=np.float64)
        index = np.asarray(arr.attrs["kernel_index"], dtype=np.int64)
        m_in = int(str(arr.attrs["n_kernels_in"]))
    except Exception as exc:  # noqa: BLE001 - any unreadable member is damage, named below
        return None, f"{name} cannot be read ({type(exc).__name__}: {exc})"
    want = (2, n_kernels, n_samples)
    if stack.shape != want or index.shape != (n_kernels,):
        return None, f"{name} have shape {stack.shape}, not {want}"
    problem = _value_problem(name, stack, index, m_in)
    if problem is None and statistics_sha256(stack) != (attrs.get("manifest") or {}).get("statistics_sha256"):
        problem = f"{name} are not what `lswmkc prepare` wrote (their sha256 is not the manifest's)"
    if problem:
        return None, problem
    return (stack[0], stack[1], index, m_in), None
