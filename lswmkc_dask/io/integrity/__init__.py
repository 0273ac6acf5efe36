"""Integrity of a kernel store (format ``lswmkc-kernel-store/2``, :func:`lswmkc_dask.prepare`).

Chunks carry zarr's ``crc32c`` codec; a manifest, written last into the group attributes,
keeps what that codec cannot see (docs/user-guide/kernels-and-features.md, "The kernel
store"). :mod:`.files`: every file of a local store read as untrusted input (regular files only,
never blocking, bounded in size, metadata JSON checked); :mod:`.format`: the format, the manifest, the messages and the checks at open
(:func:`store_problems`, :func:`open_checked`); :mod:`.read`: the checked read of rows on
every fit (:func:`checked_read`), of the training statistics kept for ``LSWMKC.predict``
(:func:`read_statistics`), and ``lswmkc verify`` (:func:`inspect_store`).
"""

from __future__ import annotations

from .files import StoreFileError, checked_group
from .format import (
    ARRAY,
    DTYPES,
    STORE_FORMAT,
    StoreLocation,
    chunk_codecs,
    chunk_crc32c,
    damaged,
    is_local,
    make_manifest,
    open_checked,
    store_problems,
)
from .read import (
    STATISTICS,
    StoreReport,
    checked_read,
    inspect_store,
    read_statistics,
    statistics_sha256,
    verify_store,
)

__all__ = ["ARRAY", "DTYPES", "STATISTICS", "STORE_FORMAT", "StoreFileError", "StoreLocation", "StoreReport",
           "checked_group", "checked_read", "chunk_codecs", "chunk_crc32c", "damaged", "inspect_store", "is_local",
           "make_manifest", "open_checked", "read_statistics", "statistics_sha256", "store_problems", "verify_store"]
