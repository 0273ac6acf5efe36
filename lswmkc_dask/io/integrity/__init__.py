"""Integrity of a kernel store (format ``lswmkc-kernel-store/2``, :func:`lswmkc_dask.prepare`).

Chunks carry zarr's ``crc32c`` codec; a manifest, written last into the group attributes,
keeps what that codec cannot see (docs/user-guide/kernels-and-features.md, "The kernel
store"). :mod:`.format`: the format, the manifest, the messages and the checks at open
(:func:`store_problems`, :func:`open_checked`); :mod:`.read`: the checked read of rows on
every fit (:func:`checked_read`) and ``lswmkc verify`` (:func:`inspect_store`);
:mod:`.statistics`: the training statistics kept for ``LSWMKC.predict``.
"""

from __future__ import annotations

from .format import (
    ARRAY,
    DTYPES,
    STORE_FORMAT,
    StoreLocation,
    chunk_codecs,
    chunk_crc32c,
    damaged,
    make_manifest,
    open_checked,
    store_problems,
)
from .read import StoreReport, checked_read, inspect_store, verify_store

__all__ = ["ARRAY", "DTYPES", "STORE_FORMAT", "StoreLocation", "StoreReport", "checked_read", "chunk_codecs",
           "chunk_crc32c", "damaged", "inspect_store", "make_manifest", "open_checked", "store_problems",
           "verify_store"]
