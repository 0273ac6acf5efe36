"""Ground-truth labels: validation against the number of samples, and label files."""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from ..errors import ArrayFileError, KernelInputError, UserArrayFileError
from .npz import NpzArchive


def count_classes(labels: ArrayLike) -> int:
    """The number of clusters k given by labels: their number of distinct values.

    Parameters
    ----------
    labels : array_like of shape (n,)

    Returns
    -------
    int
    """
    return int(np.unique(np.asarray(labels)).size)


def check_labels(labels: ArrayLike | None, n_samples: int, where: str = "labels") -> np.ndarray | None:
    """Validate labels against the number of samples.

    Parameters
    ----------
    labels : array_like of shape (n,) or (n, 1) or (1, n), or None
    n_samples : int
    where : str
        Name used in the error message.

    Returns
    -------
    ndarray of shape (n,) or None
        Integer labels where the values are integral, otherwise as given.

    Raises
    ------
    KernelInputError
        If the labels have another length than the kernels (one more: with a hint at a
        numeric header line read as a label), or a sample has no label
        (NaN, infinite, None or an empty string): refused, naming the samples, rather
        than counted as one more class.
    """
    if labels is None:
        return None
    y = np.asarray(labels).ravel()
    if y.dtype.kind == "O":
        y = _scalar_labels(y, where)
    if y.shape[0] != n_samples:
        hint = ("; one label more: if the file begins with a header line of numbers (such as the column name 0 that "
                "pandas' to_csv writes), it was read as a label (a numeric first line is data): remove it"
                if y.shape[0] == n_samples + 1 else "")
        raise KernelInputError(f"{where} have length {y.shape[0]} but the kernels have {n_samples} samples{hint}")
    missing = _missing(y)
    if missing.size:
        first = ", ".join(map(str, missing[:5].tolist())) + (" ..." if missing.size > 5 else "")
        raise KernelInputError(
            f"{where}: {missing.size} sample{'s have' if missing.size > 1 else ' has'} no label (NaN, infinite or "
            f"empty): sample{'s' if missing.size > 1 else ''} {first} (0-based); every sample needs a label - remove "
            "the unlabelled samples, or leave the labels out"
        )
    if y.dtype.kind == "f" and np.all(y == np.round(y)):
        y = y.astype(np.int64)
    return y


def _scalar_labels(y, where):
    """Object labels as plain values: a MATLAB cell array of strings (one small array per cell) becomes a
    string array; other non-scalar entries are refused.
    """
    values = []
    for i, v in enumerate(y.tolist()):
        if isinstance(v, np.ndarray):
            if v.size > 1:
                raise KernelInputError(
                    f"{where}: the label of sample {i} (0-based) is an array of shape {v.shape}, not one value; "
                    "labels are one number or one string per sample"
                )
            v = v.reshape(-1)[0].item() if v.size else ""  # a Python str, int or float; an empty cell: a missing label
        values.append(v)
    if all(isinstance(v, str) for v in values):
        return np.asarray(values, dtype=str)
    if all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=np.float64)
    return np.asarray(values, dtype=object)


def _missing(y):
    """Indices of missing labels: NaN/Inf, None, empty strings."""
    if y.dtype.kind in "fc":
        return np.flatnonzero(~np.isfinite(y))
    if y.dtype.kind in "US":
        return np.flatnonzero(np.char.strip(y.astype(str)) == "")
    gone = [i for i, v in enumerate(y.tolist()) if y.dtype.kind == "O" and (
        v is None or (isinstance(v, str) and not v.strip()) or (isinstance(v, float) and not np.isfinite(v)))]
    return np.asarray(gone, dtype=np.int64)


#: Names of a label column that mark a first row as a header even above string labels.
LABEL_HEADERS = ("label", "labels", "class", "y", "target", "true_label", "predicted_label")


def is_number(cell):
    """Whether the text ``cell`` reads as a number (``float``)."""
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _text_rows(path):
    """Rows (lists of cells, stripped) of a text label file; an empty line or last cell is refused."""
    name = path.name.lower()
    try:
        text = (gzip.open(path, "rb").read() if name.endswith(".gz") else path.read_bytes()).decode("utf-8-sig")
    except (OSError, ValueError, EOFError) as exc:  # binary garbage, bad gzip, UnicodeDecodeError
        raise KernelInputError(f"cannot read labels from {path}: {exc}") from exc
    lines = text.splitlines()
    while lines and not lines[-1].strip():  # trailing blank lines end the file; they are no samples
        lines.pop()
    first = next((ln for ln in lines if ln.strip()), "")
    delimiter = "\t" if name.endswith((".tsv", ".tsv.gz")) or ("\t" in first and "," not in first) else ","
    rows = []
    for lineno, cells in enumerate(csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter), start=1):
        cells = [c.strip() for c in cells]
        if not any(cells):
            raise KernelInputError(f"labels in {path}: line {lineno} is empty (one label per line, no gaps)")
        if not cells[-1]:
            raise KernelInputError(f"labels in {path}: line {lineno} has no label in its last cell: {','.join(cells)!r}")
        rows.append(cells)
    return rows


def _has_header(rows):
    """Whether the first row is a header (see :func:`read_labels`)."""
    if not rows:
        return False
    first, rest = rows[0], rows[1:]
    non_numeric = [j for j, c in enumerate(first) if not is_number(c)]
    if not non_numeric:
        return False
    if first[-1].lower() in LABEL_HEADERS:
        # "label" above the labels; but "y" above "n", "y", ... is a label (it recurs).
        return not any(r[-1].lower() == first[-1].lower() for r in rest)
    if not rest:
        return False
    return any(all(len(r) == len(first) and is_number(r[j]) for r in rest) for j in non_numeric)


def read_labels(path: str | os.PathLike[str]) -> np.ndarray:
    """Ground-truth labels from a file, one per sample in sample order.

    Formats, by name:

    * ``.npy`` (and ``.npz`` with an array ``labels``): a vector of shape (n,), (n, 1)
      or (1, n);
    * anything else (``.txt``, ``.csv``, ``.tsv``, optionally ``.gz``) is text: one
      label per line, or CSV rows (comma-, or tab-separated) whose last cell is the
      label, e.g. the ``sample,true_label`` files written by ``lswmkc``.

    Header rule, so that no sample is dropped or invented silently: the first row is a
    header only if it has a non-numeric cell whose column is numeric in every other row
    (``label`` above ``3``; ``sample`` above ``0,cat``), or its last cell is one of
    :data:`LABEL_HEADERS` that does not occur again as a label (``y`` above ``n``, ``y`` is
    a label). A missing label (``nan``, an empty cell) or a blank line inside the file is
    an error naming the line; trailing blank lines are ignored. The caller checks the
    number of labels (:func:`check_labels`).

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    ndarray of shape (n,)
        Floats where every value is numeric (integral values become integers in
        :func:`check_labels`), else strings.

    Raises
    ------
    FileNotFoundError, PermissionError
        Missing or unreadable file.
    KernelInputError
        A file that cannot be read as labels (binary, not a vector, blank lines,
        empty or NaN labels); the message names the file (and the line).
    """
    path = readable_file(path)
    if path.name.lower().endswith((".npy", ".npz")):
        y = np.asarray(load_arrays(path, "labels", unreadable=f"cannot read labels from {path}")[0])
        if y.ndim > 2 or (y.ndim == 2 and 1 not in y.shape):
            raise KernelInputError(f"labels in {path} must be a vector, got an array of shape {y.shape}")
        y = y.ravel()
        check_labels(y, y.shape[0], f"labels in {path}")  # missing (NaN) labels, naming the file
        return y
    rows = _text_rows(path)
    if not rows:
        raise KernelInputError(f"labels in {path}: the file holds no labels")
    header_row = _has_header(rows)
    vals = [r[-1] for r in rows[header_row:]]
    if not vals:
        raise KernelInputError(f"labels in {path}: the file holds only a header")
    if all(is_number(v) for v in vals):
        y = np.asarray([float(v) for v in vals])
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            line = int(bad[0]) + 1 + (1 if header_row else 0)
            raise KernelInputError(
                f"labels in {path}: line {line} (sample {int(bad[0])}) has no label ({vals[bad[0]]!r})"
                + (f", and {bad.size - 1} more sample{'s' * (bad.size > 2)}" if bad.size > 1 else "")
                + "; every sample needs a label"
            )
        return y
    return np.asarray(vals)


def readable_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path once it is an existing, readable file.

    Raises
    ------
    FileNotFoundError
        Nothing exists at ``path``.
    KernelInputError
        ``path`` is not a file (a directory, for instance).
    PermissionError
        The file cannot be read.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"input file not found: {path}")
    if not path.is_file():
        raise KernelInputError(f"input is not a file: {path}")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"input file is not readable: {path}")
    return path


#: The dtype kinds of a user's arrays read from an ``.npz`` file (:func:`lswmkc_dask.io.npz.check_array`):
#: numbers (complex ones refused later, naming the kernels or features), booleans, text.
USER_KINDS = "fibUSc"


class _UserArchive(NpzArchive):
    """A user's ``.npz`` file: a refusal names the array as it was saved (``array 'X' in PATH ...``)."""

    def fail(self, name: str, why: str) -> ArrayFileError:
        """The refusal of array ``name``, with what to do."""
        objects = why.startswith("holds Python objects")
        return self.error(f"array {name!r} in {self.path} {why}; {_objects_remedy(name) if objects else self.error.remedy}")


def load_arrays(path: Path, name: str, optional: str | None = None, unreadable: str = "cannot read",
                noun: str | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Arrays ``name`` and ``optional`` (None where absent) of an ``.npz`` file, read bounded and
    checked (:class:`lswmkc_dask.io.npz.NpzArchive`); an ``.npy`` file's array and None.

    Parameters
    ----------
    path : Path
        A readable file; ``.npy`` by its name, else ``.npz``.
    name, optional : str
        The array required, and one that may be absent.
    unreadable : str
        The start of the message for a file that cannot be read (why follows).
    noun : str, optional
        What an ``.npy`` file holds, for its refusal (default: ``name``).

    Returns
    -------
    tuple of (ndarray, ndarray or None)
        An ``.npz`` file's arrays are read-only.

    Raises
    ------
    KernelInputError
        An unreadable file (not a regular file, not a zip archive, a member that fails its CRC,
        would expand more than :data:`lswmkc_dask.io.npz.MAX_EXPANSION`-fold or holds fewer bytes
        than its header declares), no array ``name`` (the arrays listed), or an array saved with
        ``dtype=object`` (pickled, never loaded); the message names the file and the array.
    """
    try:
        if path.name.lower().endswith(".npy"):
            return np.load(path, allow_pickle=False), None
        with _UserArchive(path, UserArrayFileError) as data:
            if name not in data:
                raise KernelInputError(f"{path} has no array {name!r} (arrays: {', '.join(data.names) or 'none'})")
            extra = None if optional is None or optional not in data else data.read(optional, USER_KINDS, None)
            return data.read(name, USER_KINDS, None), extra
    except KernelInputError:
        raise
    except ArrayFileError as exc:
        raise KernelInputError(f"{unreadable}: {exc}") from None
    except Exception as exc:  # an .npy file: pickled, truncated, not an array file
        if isinstance(exc, ValueError) and "Object arrays" in str(exc):
            raise KernelInputError(_pickled(f"{noun or name} in {path} are", name)) from None
        raise KernelInputError(f"{unreadable}: {exc}") from exc


def _objects_remedy(name):
    """What to do with an array of Python objects."""
    return f"save numbers, or strings as a fixed-width array (np.asarray({name}, dtype=str))"


def _pickled(what, name):
    return f"{what} Python objects (saved with dtype=object), which are not read; {_objects_remedy(name)}"
