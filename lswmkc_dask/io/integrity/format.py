"""The kernel store's format (constants, chunk grid and codecs, the manifest, the messages) and
its checks without chunk data (:func:`store_problems`, :func:`open_checked`).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import zarr
from numpy.typing import ArrayLike
from zarr.abc.store import Store
from zarr.codecs import Crc32cCodec
from zarr.core.sync import sync as zarr_sync  # a zarr coroutine run to its result on zarr's loop

from ...errors import KernelInputError
from .files import STATISTICS, StoreFileError, checked_group, file_problem, is_local

STORE_FORMAT = "lswmkc-kernel-store/2"
#: Formats of earlier versions (no chunk checksums, no manifest): refused, never read.
OLD_STORE_FORMATS = ("lswmkc-kernel-store/1",)
#: Version 2 adds ``max_abs`` and ``attributes_sha256``; version 1 manifests are refused.
MANIFEST_VERSION = 2
CHECKSUM = "crc32c"
#: Group attributes whose sha256 the manifest holds (edited, they would change results
#: or their reading: the metrics, the number of clusters, the kernel names).
PROTECTED_ATTRIBUTES = ("n_kernels", "n_samples", "kernel_names", "labels", "dtype")
#: Name of the zarr array inside the store's group.
ARRAY = "kernels"
#: The store's dtypes (``dtype`` attribute -> zarr dtype).
DTYPES = {"float64": "<f8", "float32": "<f4"}
_REMEDY = "rerun `lswmkc prepare` or restore the store"
#: What the codecs of an array of a store are not, when other than :func:`codecs_as_written`.
_CODECS_WRITTEN = f"the little-endian bytes and {CHECKSUM} that `lswmkc prepare` writes"
#: Where a kernel store is: a local path, an fsspec URL, or a zarr store object (in memory).
StoreLocation: TypeAlias = str | os.PathLike[str] | Store


def kernel_array(location: StoreLocation) -> tuple[dict, zarr.Array]:
    """(group attributes, kernel array) of the kernel store at ``location``, its contents unchecked.

    Parameters
    ----------
    location : str, Path or zarr store

    Returns
    -------
    attrs : dict
    arr : zarr.Array of shape (m, n, n)

    Raises
    ------
    FileNotFoundError
        No store at a local ``location``.
    StoreFileError
        (a KernelInputError) A local store that is not a directory, or whose ``zarr.json`` or
        ``kernels/zarr.json`` is not a regular file (a FIFO, a device), is too large or is
        not a JSON object; checked before zarr opens it (:func:`.files.checked_group`).
    KernelInputError
        Not a zarr group holding an array named ``kernels``.
    """
    if is_local(location) and not os.path.lexists(location):
        raise FileNotFoundError(f"kernel store not found: {location}")
    try:
        group = checked_group(location, (ARRAY,))
        arr = group[ARRAY]
        if not isinstance(arr, zarr.Array):
            raise TypeError(f"{ARRAY!r} is a group, not an array")
        return dict(group.attrs), arr
    except StoreFileError as exc:
        raise StoreFileError(exc.problem, damaged(location, [exc.problem])) from None
    except (KeyError, FileNotFoundError, ValueError, TypeError, AttributeError) as exc:
        raise KernelInputError(f"{store_name(location)} is not a kernel store written by `lswmkc prepare` "
                               f"({type(exc).__name__}: {exc}); run `lswmkc prepare` first") from exc


def store_name(location: StoreLocation) -> str:
    """How messages name a store (str, Path or zarr store): its path or URL, or "in-memory"."""
    return str(location) if isinstance(location, (str, os.PathLike)) else f"in-memory ({type(location).__name__})"


def damaged(location: StoreLocation, problems: Sequence[str]) -> str:
    """The message of a damaged store: its name, the ``problems`` (list of str), what to do."""
    return f"kernel store {store_name(location)} is damaged: {'; '.join(problems)}; {_REMEDY}"


def open_checked(location: StoreLocation, chunks: bool = True) -> tuple[dict, zarr.Array]:
    """(group attributes, kernel array) of a kernel store with no problem :func:`store_problems` finds.

    Parameters
    ----------
    location : str, Path or zarr store
    chunks : bool
        Also check that every chunk is present, a regular file and no symbolic link, and
        the training statistics' layout and files (:func:`statistics_array`); a read
        checks its own chunks instead.

    Returns
    -------
    attrs : dict
    arr : zarr.Array of shape (m, n, n)

    Raises
    ------
    FileNotFoundError
        No store at a local ``location``.
    KernelInputError
        Not a kernel store, a store of an earlier format, or a damaged one (the message
        names the store, each problem and what to do).
    """
    attrs, arr = kernel_array(location)
    if attrs.get("format") in OLD_STORE_FORMATS:
        raise KernelInputError(f"kernel store {store_name(location)} has format {attrs['format']}, written by an "
                               "earlier version without chunk checksums or a manifest, which this version no longer "
                               "reads (damage in it would go unnoticed): rerun `lswmkc prepare` on the original "
                               f"kernels to rewrite it as {STORE_FORMAT}")
    problems = store_problems(arr, attrs, absent=None if chunks else False, links=chunks)
    if chunks and not problems:  # the statistics' layout and files, not their data (LSWMKC.fit reads them)
        problems = [p for p in [statistics_array(location, int(arr.shape[0]), int(arr.shape[1]), attrs)[1]] if p]
    if problems:
        raise KernelInputError(damaged(location, problems))
    return attrs, arr


# ----------------------------------------------------------------------------- naming rows, kernels, chunks
def _spans(values):
    """``[80, 81, 82, 90]`` -> ``"80-82, 90"`` (sorted unique integers as ranges)."""
    values = sorted({int(v) for v in values})
    runs = [[v for _, v in grp] for _, grp in itertools.groupby(enumerate(values), lambda t: t[1] - t[0])]
    out = [f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}" for run in runs]
    return ", ".join(out[:8] + ([f"... ({len(values)} in all)"] if len(out) > 8 else []))


def row_spans(values):
    """"row 85" or "rows 80-82, 90"."""
    values = {int(v) for v in values}
    return f"row {next(iter(values))}" if len(values) == 1 else f"rows {_spans(values)}"


def kernel_label(p, names):
    """"kernel 2", or "kernel 2 (gist)" when the store names it otherwise."""
    name = names[p] if isinstance(names, list) and p < len(names) else None
    return f"kernel {p}" if name in (None, f"kernel {p}") else f"kernel {p} ({name})"


def kernels_label(ps, m, names):
    """"all kernels", "kernel 2 (gist)" or "kernels 0, 2": the kernels ``ps`` of ``m``."""
    ps = sorted({int(p) for p in ps})
    if len(ps) == m and m > 1:
        return "all kernels"
    if len(ps) == 1:
        return kernel_label(ps[0], names)
    return "kernels " + ", ".join(kernel_label(p, names).removeprefix("kernel ") for p in ps)


def row_range(start, stop):
    """Rows ``start:stop`` as an inclusive range, "rows 80-119"."""
    return f"rows {start}-{stop - 1}" if stop - start > 1 else f"row {start}"


@dataclass(frozen=True)
class Chunk:
    """One chunk of the kernel array (of all m kernels): its ``key`` in the store
    (``kernels/c/0/2/0``) and the ``(start, stop)`` of its ``rows``.
    """

    key: str
    rows: tuple

    def describe(self, m, names=None):
        """"the chunk of rows 80-119 of all kernels (kernels/c/0/2/0)"."""
        return f"the chunk of {row_range(*self.rows)} of {kernels_label(range(m), m, names)} ({self.key})"


def chunk_count(arr: Any) -> int:
    """The number of chunks the array ``arr`` declares (its chunk grid), computed without listing them."""
    return math.prod(-(-int(s) // max(1, int(c))) for s, c in zip(arr.shape, arr.chunks))


def encoded_chunk_bytes(arr: Any) -> int:
    """The bytes of one chunk file of ``arr`` as `lswmkc prepare` writes it (no compression): the
    chunk's values and the 4 bytes of its crc32c.
    """
    return math.prod(int(c) for c in arr.chunks) * np.dtype(arr.dtype).itemsize + 4


def chunks_of(arr: Any) -> list:
    """Every chunk (list of :class:`Chunk`) of a kernel array ``arr`` (m, n, n) chunked ``(m, rows, n)``, in grid order."""
    shape, chunks = arr.shape, arr.chunks
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    prefix = arr.store_path.path
    out = []
    for coords in itertools.product(*map(range, grid)):
        key = arr.metadata.encode_chunk_key(coords)
        rows = (coords[1] * chunks[1], min(shape[1], (coords[1] + 1) * chunks[1]))
        out.append(Chunk(f"{prefix}/{key}" if prefix else key, rows))
    return out


# ----------------------------------------------------------------------------- checksums and the manifest
def chunk_codecs() -> list:
    """Bytes-to-bytes codecs of the kernel array: a crc32c checksum, no compression."""
    return [Crc32cCodec()]


def chunk_crc32c(block: np.ndarray, chunk_shape: tuple, dtype: Any = "<f8") -> int:
    """The crc32c of the chunk holding ``block``: the bytes zarr's ``crc32c`` codec checksums.

    The chunk's values in C order, the rows past the array's last (the last chunk) padded
    with the fill value 0; ``block`` is not copied.

    Parameters
    ----------
    block : ndarray of shape (m, rows, n)
        The chunk's rows (the last chunk may hold fewer than ``chunk_shape[1]``).
    chunk_shape : tuple of int
        ``(m, block_rows, n)``.
    dtype : str
        The store's dtype ("<f8" or "<f4"): the bytes that are checksummed.

    Returns
    -------
    int
    """
    import google_crc32c

    data = np.asarray(block, dtype=dtype)
    pad = bytes((chunk_shape[1] - data.shape[1]) * data.shape[2] * data.itemsize)
    crc = 0
    for kernel in data:  # each kernel's rows are contiguous, then the padding of its rows
        crc = google_crc32c.extend(crc, np.ascontiguousarray(kernel).reshape(-1).view(np.uint8))
        crc = google_crc32c.extend(crc, pad) if pad else crc
    return int(crc)


def _canonical(value):
    """The canonical JSON text of an attribute value (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def attribute_digests(attrs: dict) -> dict:
    """Name -> hex sha256 of each protected attribute's canonical JSON (:data:`PROTECTED_ATTRIBUTES`;
    an absent one hashed as null) of a store's group attributes ``attrs``.
    """
    return {k: hashlib.sha256(_canonical(attrs.get(k)).encode()).hexdigest() for k in PROTECTED_ATTRIBUTES}


def make_manifest(arr: Any, crcs: Sequence[int], max_abs: ArrayLike, attrs: dict) -> dict:
    """The manifest of a kernel store (group attribute ``manifest``), written last.

    Parameters
    ----------
    arr : zarr.Array
        The kernel array of shape (m, n, n), after all chunks are written.
    crcs : sequence of int
        The crc32c of each chunk (:func:`chunk_crc32c`), in grid order.
    max_abs : array_like of shape (m,)
        Largest ``|K_ij|`` of each stored kernel (in the stored precision).
    attrs : dict
        The other group attributes (their digests: :func:`attribute_digests`).

    Returns
    -------
    dict
        JSON-ready.
    """
    table = chunks_of(arr)
    return {
        "version": MANIFEST_VERSION,
        "array": ARRAY,
        "shape": list(arr.shape),
        "chunks": list(arr.chunks),
        "chunk_grid": [-(-s // c) for s, c in zip(arr.shape, arr.chunks)],
        "checksum": CHECKSUM,
        "chunk_keys": [c.key for c in table],
        "chunk_rows": [list(c.rows) for c in table],
        "chunk_crc32c": [int(crc) for crc in crcs],
        "max_abs": [float(v) for v in np.asarray(max_abs, dtype=np.float64)],
        "attributes_sha256": attribute_digests(json.loads(_canonical({k: attrs.get(k) for k in PROTECTED_ATTRIBUTES}))),
    }


# ----------------------------------------------------------------------------- checks without chunk data
def missing_chunks(arr: Any) -> list:
    """The chunks (list of Chunk) of the zarr array ``arr`` whose key is absent from its store:
    looked up one by one where zarr's count (``nchunks_initialized``) is short or unknown.
    """
    table = chunks_of(arr)
    try:
        if arr.nchunks_initialized == len(table):
            return []
    except (NotImplementedError, FileNotFoundError):
        pass
    store = arr.store_path.store

    async def exists():
        return await asyncio.gather(*(store.exists(c.key) for c in table))

    return [c for c, ok in zip(table, zarr_sync(exists())) if not ok]


def local_root(arr):
    """The directory of a local (file system) store, or None."""
    store = arr.store_path.store
    return Path(store.root) if isinstance(store, zarr.storage.LocalStore) else None


def chunk_file_problem(chunk: Chunk, m: int, names: list | None, root: Path | None,
                       limit: int | None = None) -> str | None:
    """What is wrong with the file of a chunk, found without opening it: reached through a
    symbolic link, not a regular file (a FIFO, a device, a directory), or larger than ``limit``.

    Parameters
    ----------
    chunk : Chunk
    m : int
        The number of kernels (for the chunk's description).
    names : list of str or None
        The kernels' names.
    root : Path or None
        The store's directory; None (not a local store): nothing to check.
    limit : int, optional
        The most bytes the chunk's file may hold (:func:`encoded_chunk_bytes`).

    Returns
    -------
    str or None
        The problem, naming the chunk and the file; None for a sound file, or none at all
        (a missing chunk is reported as missing).
    """
    if root is None:
        return None
    path = root
    for part in chunk.key.split("/"):
        path = path / part
        if path.is_symlink():
            try:
                target = os.readlink(path)
            except OSError:  # pragma: no cover - raced away
                target = "?"
            return (f"{chunk.describe(m, names)} is a symbolic link ({path} -> {target}), not a file of the store: "
                    "its bytes are whatever the link points to now")
    problem = file_problem(path, limit)
    return None if problem is None else f"{chunk.describe(m, names)}: {problem}"


def codecs_as_written(arr: Any) -> bool:
    """Whether the codecs of a zarr array are those `lswmkc prepare` writes.

    Parameters
    ----------
    arr : zarr.Array

    Returns
    -------
    bool
        True for the little-endian bytes and a crc32c, no compression: a chunk file then
        holds its values as they are, so that no chunk can inflate beyond its declared size.
    """
    codecs = list(getattr(arr.metadata, "codecs", ()))
    return (codec_names(arr) == ["BytesCodec", "Crc32cCodec"]
            and str(getattr(getattr(codecs[0], "endian", None), "value", "")) == "little")


def codec_names(arr: Any) -> list[str]:
    """The class names of the codecs of a zarr array, in order (``["BytesCodec", "Crc32cCodec"]``)."""
    return [type(c).__name__ for c in getattr(arr.metadata, "codecs", ())]


def layout_problems(arr, attrs):
    """Problems that make the chunks unreadable as a prepared store: shape, chunking, dtype, codecs."""
    shape, chunks = list(arr.shape), list(arr.chunks)
    if arr.ndim != 3 or shape[1] != shape[2] or min(shape) < 1:
        return [f"its array has shape {shape}, not (m, n, n)"]
    if chunks[0] != shape[0] or chunks[2] != shape[2]:
        return [(f"its array is chunked {chunks}, not in blocks of whole rows of every kernel as `lswmkc prepare` "
                 f"writes it ([{shape[0]}, rows, {shape[2]}])")]
    dtype = attrs.get("dtype", "float64")
    known = isinstance(dtype, str) and dtype in DTYPES
    return [why for wrong, why in (
        (not known or np.dtype(arr.dtype) != np.dtype(DTYPES[dtype]),
         f"its array holds {np.dtype(arr.dtype)} values but its attributes say dtype {dtype!r}"),
        (not codecs_as_written(arr), f"its array's codecs are {codec_names(arr)}, not {_CODECS_WRITTEN}"),
    ) if wrong]


def _manifest_problems(arr, attrs):
    """Problems of the manifest against the array and the attributes."""
    man = attrs.get("manifest")
    if not isinstance(man, dict):
        return ["the manifest of its chunks is missing from its attributes (an interrupted or altered write)"]
    if man.get("version") != MANIFEST_VERSION:
        return [(f"its manifest is of version {man.get('version')!r}, not {MANIFEST_VERSION} (written by an earlier "
                 "version, without the digests of its attributes)")]
    m = arr.shape[0]
    out = []
    if man.get("shape") != list(arr.shape) or man.get("chunks") != list(arr.chunks):
        out.append(f"the array has shape {list(arr.shape)} and chunks {list(arr.chunks)} but its manifest says "
                   f"{man.get('shape')} and {man.get('chunks')}")
    crcs, listed_keys, count = man.get("chunk_crc32c"), man.get("chunk_keys"), chunk_count(arr)
    listed = len(listed_keys) if isinstance(listed_keys, list) else 0
    if listed != count or listed_keys != [c.key for c in chunks_of(arr)]:  # (listed only when as many as declared)
        out.append(f"the manifest lists other chunks ({listed}) than the array has ({count})")
    elif not isinstance(crcs, list) or len(crcs) != count or not all(isinstance(c, int) for c in crcs):
        out.append("the manifest's chunk checksums do not match its chunk list")
    bounds = man.get("max_abs")
    if (not isinstance(bounds, list) or len(bounds) != m
            or not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in bounds)):
        out.append(f"the manifest's largest |K_ij| of each kernel (max_abs) is not {m} finite numbers")
    digests = man.get("attributes_sha256")
    if not isinstance(digests, dict):
        out.append("the manifest holds no digests of its attributes")
        return out
    what = {"labels": "its labels are", "kernel_names": "its kernel names are"}
    return out + [f"{what.get(key, f'its {key} is')} not what `lswmkc prepare` wrote (attribute {key!r} edited since: "
                  "its sha256 is not the manifest's)" for key, now in attribute_digests(attrs).items()
                  if digests.get(key) != now]


def _label_problems(labels, n):
    """A stored label attribute: n plain labels, none missing."""
    if labels is None:
        return []
    if not isinstance(labels, list):
        return [f"its labels attribute is a {type(labels).__name__}, not a list of {n} labels"]
    out = []
    if len(labels) != n:
        out.append(f"it holds {len(labels)} labels for {n} samples")
    missing = [
        i for i, v in enumerate(labels)
        if v is None or v == "" or isinstance(v, (list, dict)) or (isinstance(v, float) and not math.isfinite(v))
    ]
    if missing:
        first = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
        out.append(f"{len(missing)} of its labels {'are' if len(missing) > 1 else 'is'} missing (NaN, infinite, null "
                   f"or empty): sample{'s' if len(missing) > 1 else ''} {first} (0-based)")
    return out


def structure_agrees(arr: Any, attrs: dict) -> bool:
    """True when what the kernel array ``arr`` declares (its shape, its chunk shape, its number of
    chunks) is what the store's attributes and manifest say: compared before any chunk is listed
    or read, so that a few edited bytes declaring a vast array cost neither memory nor time.
    """
    man = attrs.get("manifest")
    if not isinstance(man, dict) or arr.ndim != 3:
        return False
    keys = man.get("chunk_keys")
    return (man.get("shape") == list(arr.shape) and man.get("chunks") == list(arr.chunks)
            and isinstance(keys, list) and len(keys) == chunk_count(arr)
            and attrs.get("n_kernels") == arr.shape[0] and attrs.get("n_samples") == arr.shape[1])


def store_problems(arr: Any, attrs: dict, absent: Any = None, links: Any = True) -> list[str]:
    """Problems of a kernel store found without reading chunk data.

    The format, the array's shape, chunking, dtype and codecs, the attributes against
    the array (counts, kernel names, labels: none missing), the manifest against the
    array and the attributes (their sha256); then, only where the array's declared shape
    and chunks agree with them (:func:`structure_agrees`, so that no vast declared grid
    is ever listed), every chunk present and (``links``) each a regular file, not a
    symbolic link. :func:`lswmkc_dask.open_store` refuses a store with any;
    ``lswmkc verify`` reports them.

    Parameters
    ----------
    arr : zarr.Array
        The store's kernel array.
    attrs : dict
        The store's group attributes.
    absent : list of Chunk, optional
        The result of :func:`missing_chunks`, if already known; False: presence not checked.
    links : bool
        Check that every chunk of a local store is a regular file within its declared
        size (:func:`chunk_file_problem`): no symbolic link, FIFO or device.

    Returns
    -------
    list of str
        Empty when none; each names what is wrong (and the chunk, kernels and rows).
    """
    fmt = attrs.get("format")
    if fmt != STORE_FORMAT:
        if fmt in OLD_STORE_FORMATS:
            return [(f"its format {fmt} has no chunk checksums or manifest and is no longer read; rerun "
                     "`lswmkc prepare` on the original kernels to rewrite it")]
        return [f"format {fmt!r} is not the kernel store format this version reads ({STORE_FORMAT}); an interrupted "
                "`lswmkc prepare` leaves no format attribute"]
    out = layout_problems(arr, attrs)
    if arr.ndim != 3 or min(arr.shape) < 1 or arr.shape[1] != arr.shape[2] or arr.chunks[0] != arr.shape[0]:
        return out
    m, n = int(arr.shape[0]), int(arr.shape[1])
    if attrs.get("n_samples") != n or attrs.get("n_kernels") != m:
        out.append(f"its attributes say {attrs.get('n_kernels')} kernels x {attrs.get('n_samples')} samples but the "
                   f"array holds {m} x {n}")
    names = attrs.get("kernel_names")
    if not isinstance(names, list) or len(names) != m:
        count = len(names) if isinstance(names, list) else names
        out.append(f"it names {count} kernels (kernel_names) but the array holds {m}")
        names = None
    out += _label_problems(attrs.get("labels"), n)
    out += _manifest_problems(arr, attrs)
    if not structure_agrees(arr, attrs):  # its chunks are not listed: the store is refused already
        return out
    if absent is not False:
        absent = missing_chunks(arr) if absent is None else absent
        if len(absent) == 1:
            out.append(f"{absent[0].describe(m, names)} is missing")
        elif absent:
            out.append(f"{len(absent)} chunks are missing: "
                       + ", ".join(c.describe(m, names).removeprefix("the chunk of ") for c in absent))
    root = local_root(arr) if links else None
    limit = encoded_chunk_bytes(arr)
    return out + [p for c in (chunks_of(arr) if root is not None else ())
                  if (p := chunk_file_problem(c, m, names, root, limit))]


# ----------------------------------------------------------------------------- the training statistics' layout
#: How the problem of a store whose statistics were removed begins.
STATISTICS_MISSING = f"its training statistics ({STATISTICS!r}) are missing"


def statistics_array(location: StoreLocation, n_kernels: int, n_samples: int,
                     attrs: dict) -> tuple[zarr.Array | None, str | None]:
    """The training statistics' array of a store (:data:`.files.STATISTICS`) and what is wrong with
    it found without reading its data: its metadata file (a regular file, a JSON object), what
    it declares (shape ``(2, m, n)`` for kernels of shape ``(m, n, n)``, one chunk, float64, the
    codecs `lswmkc prepare` writes) and its chunk file (regular, within its declared size).

    Parameters
    ----------
    location : str, Path or zarr store
    n_kernels, n_samples : int
        m and n of the store's kernels.
    attrs : dict
        The store's group attributes (a manifest with ``statistics_sha256`` says the
        statistics were written).

    Returns
    -------
    arr : zarr.Array or None
        None when absent or damaged.
    problem : str or None
        None when sound, or absent from a store prepared by an earlier version (whose
        manifest records no ``statistics_sha256``).
    """
    name = f"its training statistics ({STATISTICS!r})"
    root = Path(os.path.abspath(os.fspath(location))) if is_local(location) else None
    try:
        group = checked_group(location, (STATISTICS,))
        arr = group[STATISTICS]
    except KeyError:
        manifest = attrs.get("manifest")
        if isinstance(manifest, dict) and "statistics_sha256" in manifest:
            return None, (f"{STATISTICS_MISSING}: `lswmkc prepare` wrote them (the manifest holds their sha256), "
                          "and they were removed since")
        return None, None
    except StoreFileError as exc:
        return None, f"{name}: {exc.problem}"
    except Exception as exc:  # noqa: BLE001 - any unreadable metadata is damage, named here
        return None, f"{name} cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"
    if not isinstance(arr, zarr.Array):
        return None, f"{name} are a group, not an array"
    want = (2, int(n_kernels), int(n_samples))
    if tuple(arr.shape) != want:
        return None, f"{name} have shape {tuple(arr.shape)}, not {want}"
    if tuple(arr.chunks) != want:
        return None, f"{name} are chunked {tuple(arr.chunks)}, not in the one chunk {want} `lswmkc prepare` writes"
    if np.dtype(arr.dtype) != np.dtype("<f8"):
        return None, f"{name} hold {np.dtype(arr.dtype)} values, not the float64 `lswmkc prepare` writes"
    if not codecs_as_written(arr):
        return None, f"{name} have the codecs {codec_names(arr)}, not {_CODECS_WRITTEN}"
    if root is not None:
        key = arr.metadata.encode_chunk_key((0, 0, 0))
        problem = file_problem(root / STATISTICS / key, encoded_chunk_bytes(arr))
        if problem is not None:
            return None, f"{name}: {problem}"
    return arr, None
