"""Integrity of a kernel store: checksummed chunks, a manifest, checks at open and at every read.

A store of format ``lswmkc-kernel-store/2`` (written by :func:`lswmkc_dask.prepare`)
has

* every chunk written with zarr v3's ``crc32c`` codec (the last bytes-to-bytes codec,
  no compression);
* a manifest in the group attributes, written last: array shape, chunk shape and
  grid, the key, row range and crc32c of every chunk, the largest ``|K_ij|`` of each
  kernel, and the sha256 of the attributes the results depend on (labels, kernel
  names, counts, dtype).

Checks:

* at open (:func:`store_problems`, called by :func:`lswmkc_dask.open_store`, so by
  every fit and sweep given a path): the format, the array against its attributes
  and its manifest, the attributes against their manifest digests, the labels, and
  every chunk present (zarr would read a missing chunk as zeros, its fill value) and
  a file of the store rather than a symbolic link;
* at read (:func:`checked_read`, called by :func:`lswmkc_dask.io.read_store_rows` in
  the process and on the Dask workers): each chunk's raw bytes are checked against
  their crc32c trailer AND the manifest's crc32c before they are decoded, then for
  finite values, ``|K_ij|`` within the manifest's bound and a unit diagonal; any
  failure is a :class:`KernelInputError` naming the store, the kernel(s), the rows
  and what to do;
* :func:`verify_store` (``lswmkc verify STORE``): all of the above for every chunk,
  and the symmetry of every kernel.

Stores of the first format, ``lswmkc-kernel-store/1`` (no checksums, no manifest), are
refused: rerun ``lswmkc prepare`` to rewrite them.

One module per job: :mod:`.format` (the format, the chunks, the manifest written by
``prepare``), :mod:`.checks` (the checks at open), :mod:`.read` (the checked read) and
:mod:`.verify` (``lswmkc verify``); their names are importable from here.
"""

from __future__ import annotations

from .checks import linked_chunks, missing_chunks, store_problems, structure_problems, value_problems
from .format import (
    ARRAY,
    CHECKSUM,
    DIAGONAL_TOL,
    DTYPES,
    MANIFEST_VERSION,
    NOT_A_STORE,
    OLD_STORE_FORMATS,
    PROTECTED_ATTRIBUTES,
    STORE_FORMAT,
    VALUE_TOL,
    Chunk,
    StoreLocation,
    attribute_digests,
    chunk_codecs,
    chunk_crc32c,
    chunks_of,
    damaged,
    kernel_array,
    make_manifest,
    old_format_message,
    store_name,
)
from .read import checked_read
from .verify import StoreReport, inspect_store, verify_store

__all__ = [
    "ARRAY",
    "CHECKSUM",
    "Chunk",
    "DIAGONAL_TOL",
    "DTYPES",
    "MANIFEST_VERSION",
    "NOT_A_STORE",
    "OLD_STORE_FORMATS",
    "PROTECTED_ATTRIBUTES",
    "STORE_FORMAT",
    "StoreLocation",
    "StoreReport",
    "VALUE_TOL",
    "attribute_digests",
    "checked_read",
    "chunk_codecs",
    "chunk_crc32c",
    "chunks_of",
    "damaged",
    "inspect_store",
    "kernel_array",
    "linked_chunks",
    "make_manifest",
    "missing_chunks",
    "old_format_message",
    "store_name",
    "store_problems",
    "structure_problems",
    "value_problems",
    "verify_store",
]
