"""Integrity of a kernel store: checksummed chunks, a manifest, checks at open and at every read.

A store of format ``lswmkc-kernel-store/2`` (:func:`lswmkc_dask.prepare`) has every chunk
written with zarr v3's ``crc32c`` codec (no compression), which zarr checks as it reads a
chunk; and, written last into the group attributes, a manifest of what that codec cannot
see: the crc32c of every chunk (a valid chunk swapped in), the largest ``|K_ij|`` of each
kernel and the sha256 of the attributes results depend on (labels, kernel names, counts,
dtype). The checks zarr does not make are made here:

* at open (:mod:`.checks`, :func:`store_problems`, by :func:`lswmkc_dask.open_store`): the
  format, the array against its attributes and manifest, the attributes' digests, the
  labels, every chunk present (zarr would read a missing one as zeros) and no chunk a
  symbolic link;
* at read (:mod:`.read`, :func:`checked_read`, in the process and on Dask workers): each
  chunk's crc32c against the manifest's, finite values, ``|K_ij|`` within the manifest's
  bound and a unit diagonal; a failure is a :class:`KernelInputError` naming the store,
  the kernel(s), the rows and what to do;
* :mod:`.verify`, :func:`verify_store` (``lswmkc verify``): all of it for every chunk, and
  the symmetry of every kernel.

Stores of the first format (``lswmkc-kernel-store/1``: no checksums) are refused.
:mod:`.format` holds the format, the chunk grid, the manifest and the messages.
"""

from __future__ import annotations

from .checks import store_problems
from .format import (
    ARRAY,
    DTYPES,
    NOT_A_STORE,
    OLD_STORE_FORMATS,
    STORE_FORMAT,
    StoreLocation,
    chunk_codecs,
    chunk_crc32c,
    chunks_of,
    damaged,
    kernel_array,
    make_manifest,
    old_format_message,
)
from .read import checked_read
from .verify import StoreReport, inspect_store, verify_store

__all__ = ["ARRAY", "DTYPES", "NOT_A_STORE", "OLD_STORE_FORMATS", "STORE_FORMAT", "StoreLocation", "StoreReport",
           "checked_read", "chunk_codecs", "chunk_crc32c", "chunks_of", "damaged", "inspect_store", "kernel_array",
           "make_manifest", "old_format_message", "store_problems", "verify_store"]
