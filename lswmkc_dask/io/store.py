"""The zarr kernel store: writing it blockwise (:func:`prepare`) and opening it.

``prepare`` writes a zarr v3 group with one array ``kernels`` of shape ``(m, n, n)``,
chunked by row blocks ``(m, block_rows, n)``, after symmetrise -> centre -> normalise
(docs/algorithm.md section 0). Labels and metadata go to the group attributes. The work
is blockwise: two passes over row blocks (statistics, then writing), so no more than a
few row blocks are in memory at once, and the store is written under a temporary name
and renamed when complete.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from ..errors import KernelInputError
from ..kernels import (
    ArrayKernelSource,
    FeatureKernels,
    centre_normalise_rows,
    default_block_rows,
    scan_kernels,
)
from .atomic import atomic_path
from .labels import check_labels
from .readers import open_kernel_file

__all__ = ["STORE_FORMAT", "KernelStore", "open_store", "prepare", "read_store_rows"]

STORE_FORMAT = "lswmkc-kernel-store/1"
@dataclass
class KernelStore:
    """An opened kernel store (see :func:`prepare`).

    Attributes
    ----------
    location : str or zarr.abc.store.Store
        Path or URL of the store, or an in-memory zarr store.
    n_kernels, n_samples, block_rows : int
        m, n and the rows per chunk.
    labels : ndarray of shape (n,) or None
    attrs : dict
        The group attributes.
    """

    location: object
    n_kernels: int
    n_samples: int
    block_rows: int
    labels: np.ndarray | None
    attrs: dict

    @property
    def in_memory(self):
        """True for a zarr memory store (not readable by other processes)."""
        return not isinstance(self.location, (str, os.PathLike))

    def array(self):
        """The zarr array ``kernels`` of shape (m, n, n), opened read-only."""
        return zarr.open_group(self.location, mode="r")["kernels"]

    def blocks(self, block_rows=None):
        """Row ranges ``[(start, stop), ...]`` covering ``0..n``."""
        b = int(block_rows or self.block_rows)
        return [(s, min(self.n_samples, s + b)) for s in range(0, self.n_samples, b)]

    def read_rows(self, start, stop):
        """Rows ``start:stop`` of every preprocessed kernel, shape (m, b, n)."""
        return read_store_rows(self.location, start, stop)


def read_store_rows(location, start, stop):
    """Read rows ``start:stop`` of a kernel store; shape (m, stop - start, n), float64.

    A plain function of the store's location so that Dask workers can call it.
    """
    return np.asarray(zarr.open_array(location, path="kernels", mode="r")[:, start:stop, :], dtype=np.float64)


def open_store(location):
    """Open a kernel store written by :func:`prepare`.

    Parameters
    ----------
    location : str, Path or zarr store
        Directory (``*.zarr``), fsspec URL (``s3://...``) or zarr store.

    Returns
    -------
    KernelStore

    Raises
    ------
    FileNotFoundError
        No store at ``location``.
    KernelInputError
        Not a kernel store written by this package.
    """
    if isinstance(location, os.PathLike) or (isinstance(location, str) and "://" not in location):
        location = str(location)
        if not Path(location).exists():
            raise FileNotFoundError(f"kernel store not found: {location}")
    try:
        group = zarr.open_group(location, mode="r")
        attrs = dict(group.attrs)
        shape = group["kernels"].shape
        chunks = group["kernels"].chunks
    except (KeyError, FileNotFoundError, ValueError, TypeError) as exc:
        raise KernelInputError(f"{location} is not a kernel store (run `lswmkc prepare` first): {exc}") from exc
    if attrs.get("format") != STORE_FORMAT:
        raise KernelInputError(f"{location} is not a kernel store written by `lswmkc prepare`")
    labels = attrs.get("labels")
    return KernelStore(
        location=location,
        n_kernels=int(shape[0]),
        n_samples=int(shape[1]),
        block_rows=int(chunks[1]),
        labels=None if labels is None else np.asarray(labels),
        attrs=attrs,
    )


def _is_url(location):
    return isinstance(location, str) and "://" in location


def _url_store_exists(url):
    try:
        zarr.open_group(url, mode="r")
    except (FileNotFoundError, KeyError, ValueError):
        return False
    return True


def _as_source(data, labels):
    """(source, labels, closer, description) from a path, array(s) or FeatureKernels."""
    if isinstance(data, (str, os.PathLike)):
        source, file_labels, close = open_kernel_file(data)
        if labels is None:
            labels = file_labels
        return source, labels, close, str(data)
    if isinstance(data, (FeatureKernels, ArrayKernelSource)):
        return data, labels, lambda: None, type(data).__name__
    return ArrayKernelSource(data), labels, lambda: None, "array"


def prepare(data, output=None, *, labels=None, block_rows=None, overwrite=False, kernel_names=None, symmetry_tol=1e-6):
    """Preprocess base kernels into a chunked zarr kernel store (docs/algorithm.md section 0).

    Each kernel is symmetrised, centred, given ``+1e-12`` on its diagonal and
    normalised to unit diagonal, block of rows by block of rows: a first pass
    validates and collects column means and diagonals, a second writes the rows.

    Parameters
    ----------
    data : str, Path, array_like of shape (m, n, n), list of (n, n) arrays, or FeatureKernels
        A kernel file (see :func:`load_kernels`), in-memory kernels, or features
        turned into kernels row block by row block.
    output : str or Path, optional
        Directory of the store (conventionally ``*.zarr``), or an fsspec URL
        (``s3://bucket/k.zarr``, needs the matching fsspec backend such as s3fs).
        None: an in-memory zarr store, for one process. A directory is written under
        a temporary name and renamed when complete; a URL is written in place with
        the attributes last, so an interrupted write is never taken for a store.
    labels : array_like of shape (n,), optional
        Overrides labels read from the file.
    block_rows : int, optional
        Rows per chunk; default about 32 MiB per ``(m, rows, n)`` chunk.
    overwrite : bool
        Replace an existing output.
    kernel_names : sequence of str, optional
    symmetry_tol : float
        See :func:`scan_kernels`.

    Returns
    -------
    KernelStore

    Raises
    ------
    FileNotFoundError, PermissionError
        Missing or unreadable input.
    FileExistsError
        ``output`` exists and ``overwrite`` is False. Nothing is written.
    KernelInputError
        Any invalid input (see :func:`open_kernel_file`, :func:`scan_kernels`,
        :func:`check_labels`). Nothing is written.
    """
    url = output is not None and _is_url(output)
    if output is not None and not overwrite and (_url_store_exists(output) if url else Path(output).exists()):
        raise FileExistsError(f"output {output} already exists (pass overwrite=True or --overwrite to replace it)")
    source, labels, close, description = _as_source(data, labels)
    try:
        m, n, _ = source.shape
        if n < 3:
            raise KernelInputError(f"need at least 3 samples, got {n}")
        labels = check_labels(labels, n)
        names = list(kernel_names) if kernel_names is not None else [f"kernel {p}" for p in range(m)]
        if len(names) != m:
            raise KernelInputError(f"{len(names)} kernel names for {m} kernels")
        block_rows = int(block_rows) if block_rows else default_block_rows(m, n)
        if block_rows < 1:
            raise ValueError(f"block_rows must be >= 1, got {block_rows}")
        block_rows = min(block_rows, n)
        stats = scan_kernels(source, block_rows, symmetry_tol=symmetry_tol, names=names)
        attrs = {
            "format": STORE_FORMAT,
            "n_kernels": m,
            "n_samples": n,
            "kernel_names": names,
            "source": description,
            "preprocessing": "symmetrise, centre (+1e-12 I), normalise (docs/algorithm.md section 0)",
            "max_asymmetry": stats.max_asymmetry.tolist(),
            "labels": None if labels is None else labels.tolist(),
        }

        def write(location):
            group = zarr.open_group(location, mode="w")
            arr = group.create_array(
                "kernels", shape=(m, n, n), chunks=(m, block_rows, n), dtype="f8", compressors=None, fill_value=0.0
            )
            symmetric = isinstance(source, FeatureKernels)
            for start in range(0, n, block_rows):
                stop = min(n, start + block_rows)
                rows = source.rows(start, stop)
                if not symmetric:
                    rows = 0.5 * (rows + source.transposed_rows(start, stop))
                arr[:, start:stop, :] = centre_normalise_rows(rows, start, stats.col_means, stats.diag)
            group.attrs.update(attrs)

        if output is None:
            location = zarr.storage.MemoryStore()
            write(location)
        elif url:
            # Object stores have no atomic rename: write in place; the group attributes,
            # written last, mark the store complete (open_store refuses it without them).
            write(str(output))
            location = str(output)
        else:
            with atomic_path(output, overwrite=overwrite) as tmp:
                write(str(tmp))
            location = str(output)
    finally:
        close()
    return KernelStore(location, m, n, block_rows, labels, attrs)
