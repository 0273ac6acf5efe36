"""glibc allocator tuning for steps that hold large NumPy arrays.

glibc returns freed memory of blocks under its mmap threshold to its own heap, not to
the system, and raises that threshold as large blocks are freed: a worker that formed
and dropped an n x n array can keep its pages. :func:`array_malloc` sets fixed trim and
mmap thresholds (:data:`ARRAY_MALLOC_THRESHOLD`) so large arrays are mapped and unmapped
directly; a no-op off glibc.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

_T = TypeVar("_T")

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, <malloc.h>
_malloc_lock = threading.Lock()
_malloc_users = 0  # steps inside array_malloc now (the thresholds are restored when it falls to 0)


#: glibc's mmap and trim thresholds (bytes) while our numeric code runs in a process
#: that fixed them at start (Dask's nanny starts workers with
#: ``MALLOC_TRIM_THRESHOLD_=65536``). 32 MiB is glibc's ceiling for the mmap threshold.
ARRAY_MALLOC_THRESHOLD = 32 * 2**20
_GLIBC_DEFAULT_THRESHOLD = 128 * 1024  # glibc's own M_TRIM/M_MMAP_THRESHOLD default
_MALLOC_ENV = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library if it is glibc with ``mallopt``/``malloc_trim``, else None."""
    if not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    except (OSError, AttributeError):
        return None
    return libc


def _env_threshold(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return _GLIBC_DEFAULT_THRESHOLD


@contextlib.contextmanager
def array_malloc() -> Iterator[bool]:
    """Let glibc reuse freed array memory while the block runs, then give it back.

    Setting a ``MALLOC_*_THRESHOLD_`` variable (Dask's nanny does, for every worker) turns
    off glibc's adaptive mmap threshold: every array above 128 KiB is a fresh ``mmap``
    (docs/user-guide/fit.md gives the cost). In such a process only, the thresholds are
    :data:`ARRAY_MALLOC_THRESHOLD` while the block runs; when the last block ends they are
    restored and ``malloc_trim(0)`` runs. Safe to nest and to enter from several threads.

    Yields
    ------
    bool
        Whether the thresholds were raised.
    """
    global _malloc_users
    libc = _glibc()
    if not libc or not any(name in os.environ for name in _MALLOC_ENV):
        yield False
        return
    with _malloc_lock:
        _malloc_users += 1
        if _malloc_users == 1:
            libc.mallopt(_M_MMAP_THRESHOLD, ARRAY_MALLOC_THRESHOLD)
            libc.mallopt(_M_TRIM_THRESHOLD, ARRAY_MALLOC_THRESHOLD)
    try:
        yield True
    finally:
        with _malloc_lock:
            _malloc_users -= 1
            if _malloc_users == 0:
                libc.mallopt(_M_MMAP_THRESHOLD, _env_threshold("MALLOC_MMAP_THRESHOLD_"))
                libc.mallopt(_M_TRIM_THRESHOLD, _env_threshold("MALLOC_TRIM_THRESHOLD_"))
                libc.malloc_trim(0)


def with_array_malloc(fn: Callable[..., _T]) -> Callable[..., _T]:
    """Decorator: run ``fn`` inside :func:`array_malloc` (for functions sent to workers)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return call_with_array_malloc(fn, *args, **kwargs)

    return wrapper


def call_with_array_malloc(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn(*args, **kwargs)`` inside :func:`array_malloc` (a task wrapper for workers, pickled
    by reference: :class:`lswmkc_dask.engine.runners.DaskRunner`).

    Returns
    -------
    object
        ``fn``'s result.
    """
    with array_malloc():
        return fn(*args, **kwargs)
