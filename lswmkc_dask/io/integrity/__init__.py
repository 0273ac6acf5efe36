"""Integrity of a kernel store: checksummed chunks, a manifest, checks at open and at every read.

A store of format ``lswmkc-kernel-store/2`` (written by :func:`lswmkc_dask.prepare`)
has every chunk written with zarr v3's ``crc32c`` codec (the last bytes-to-bytes codec,
no compression), so zarr checks each chunk's bytes as it reads it; and a manifest in the
group attributes, written last, for what that codec cannot see: the crc32c of every
chunk (a valid chunk swapped in from elsewhere), the largest ``|K_ij|`` of each kernel,
and the sha256 of the attributes the results depend on (labels, kernel names, counts,
dtype).

Checks:

* at open (:func:`store_problems`, called by :func:`lswmkc_dask.open_store`, so by
  every fit and sweep given a path): the format, the array against its attributes
  and its manifest, the attributes against their manifest digests, the labels, and
  every chunk present (zarr would read a missing chunk as zeros, its fill value) and
  a file of the store rather than a symbolic link;
* at read (:func:`checked_read`, called by :func:`lswmkc_dask.io.read_store_rows` in
  the process and on the Dask workers): zarr's checksum, then each chunk against the
  manifest's crc32c (or missing), finite values, ``|K_ij|`` within the manifest's bound
  and a unit diagonal; any failure is a :class:`KernelInputError` naming the store,
  the kernel(s), the rows and what to do;
* :func:`verify_store` (``lswmkc verify STORE``): all of the above for every chunk,
  and the symmetry of every kernel.

Stores of the first format, ``lswmkc-kernel-store/1`` (no checksums, no manifest), are
refused: rerun ``lswmkc prepare`` to rewrite them.

One module per job: :mod:`.format` (the format, the chunks, the manifest written by
``prepare``), :mod:`.checks` (the checks at open), :mod:`.read` (the checked read) and
:mod:`.verify` (``lswmkc verify``).
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

__all__ = [
    "ARRAY",
    "DTYPES",
    "NOT_A_STORE",
    "OLD_STORE_FORMATS",
    "STORE_FORMAT",
    "StoreLocation",
    "StoreReport",
    "checked_read",
    "chunk_codecs",
    "chunk_crc32c",
    "chunks_of",
    "damaged",
    "inspect_store",
    "kernel_array",
    "make_manifest",
    "old_format_message",
    "store_problems",
    "verify_store",
]
