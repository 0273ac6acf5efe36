"""Readers of base kernels and features, the first step of the data flow.

* MATLAB ``.mat`` v5 (scipy) and v7.3 (HDF5, h5py) files with the kernels in ``KH``
  in MATLAB's ``n x n x m`` order and optional labels ``Y``; ``.npz`` files with
  ``kernels`` of shape ``(m, n, n)`` and optional ``labels``;
* feature views (``.csv``, ``.npy``, ``.npz``), one file per view, turned into
  kernels by :class:`lswmkc_dask.kernels.features.FeatureKernels`.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import warnings
from typing import Any

import numpy as np

from ..errors import HeaderWarning, KernelInputError, Param, warn_at_caller, with_message
from ..kernels.features import FEATURE_MAX_ABS, TOO_LARGE_FEATURE, ArrayKernelSource
from .labels import LABEL_HEADERS, check_labels, is_number, load_arrays, readable_file

#: Names of feature files (``load_features``, ``--features``), named when given as kernels.
_FEATURE_FILES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt", ".npy")


class H5KernelSource(ArrayKernelSource):
    """Kernels ``KH`` of a MATLAB v7.3 file, read block by block with h5py: MATLAB stores ``KH``
    (n x n x m) column-major, so the HDF5 dataset has shape ``(m, n, n)``, ``h5[p, j, i] = K_p[i, j]``.
    """

    def __init__(self, dataset):
        if dataset.ndim not in (2, 3):
            raise KernelInputError(f"KH must be n x n x m, got HDF5 shape {dataset.shape[::-1]} (MATLAB order)")
        self.kernels, shape = dataset, dataset.shape if dataset.ndim == 3 else (1,) + dataset.shape
        if shape[1] != shape[2]:
            raise KernelInputError(f"KH kernels are not square: MATLAB size {shape[::-1]}")
        if shape[0] == 0:
            raise KernelInputError(f"no kernels: KH has MATLAB size {shape[::-1]} (m = 0); give at least one base kernel")
        self.shape = shape

    def _read(self, key):
        ds = self.kernels
        block = _h5_read(ds, key if ds.ndim == 3 else key[1:], "KH", np.float64)
        return block if ds.ndim == 3 else block[None]

    def rows(self, start, stop):
        """Rows ``start:stop`` of every kernel, shape (m, stop - start, n)."""
        return self._read((slice(None), slice(None), slice(start, stop))).transpose(0, 2, 1)

    def transposed_rows(self, start, stop):
        """Columns ``start:stop`` of every kernel as rows, shape (m, stop - start, n) (equal for symmetric kernels)."""
        return self._read((slice(None), slice(start, stop), slice(None)))


def _h5_read(dataset, key, name, dtype=None):
    """``dataset[key]`` of a MATLAB v7.3 file as an array; a damaged or truncated file is a KernelInputError."""
    try:
        return np.asarray(dataset[key], dtype=dtype)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        file = getattr(getattr(dataset, "file", None), "filename", "the file")
        raise KernelInputError(f"cannot read {name} from {file} (truncated or damaged?): {exc}") from exc


_ORDER_HINT = (
    ". KH must be n x n x m in MATLAB (kernel p is KH(:,:,p)); a stack saved as m x n x n "
    "needs permute(KH, [2 3 1]) in MATLAB before saving"
)


def _check_variable(path, name, dtype, matlab_class=None):
    """A clear error for a MATLAB variable that is complex, a cell array, a struct or text."""
    fields = set(dtype.names or ())
    if dtype.kind == "c" or {"real", "imag"} <= fields or {"r", "i"} <= fields:  # v7.3: complex as a compound
        raise KernelInputError(
            f"variable {name} in {path} is complex{f' ({dtype})' if dtype.kind == 'c' else ''}; base kernels must "
            f"be real (real({name}) in MATLAB if the imaginary part is only rounding error)"
        )
    if matlab_class in ("cell", "struct", "char") or dtype.kind == "O" or fields:
        raise KernelInputError(
            f"variable {name} in {path} is {f'a MATLAB {matlab_class}' if matlab_class else 'a cell array or struct'}"
            ", not a numeric array" + (f" (in MATLAB: {name} = cat(3, {name}{{:}}) for a cell array of kernels)"
                                       if name == "KH" and matlab_class != "char" else "")
        )
    if name == "KH" and dtype.kind not in "biuf":
        raise KernelInputError(f"variable {name} in {path} is not numeric (dtype {dtype}); base kernels must be real numbers")


def _h5_variable(f, path, name):
    """Variable ``name`` of a MATLAB v7.3 file ``f``: a numeric dataset, or a clear error."""
    import h5py

    obj = f[name]
    if not isinstance(obj, h5py.Dataset):
        raise KernelInputError(
            f"variable {name} in {path} is an HDF5 group (a MATLAB struct, cell array or sparse matrix), not a "
            f"numeric array" + (f"; save the kernels as a full n x n x m array (cat(3, {name}{{:}}), full({name}))"
                                if name == "KH" else "")
        )
    matlab_class = obj.attrs.get("MATLAB_class")
    _check_variable(path, name, obj.dtype, matlab_class.decode(errors="replace")
                    if isinstance(matlab_class, bytes) else matlab_class)
    return obj


def _no_kh(path, names):
    return KernelInputError(f"{path} has no variable 'KH' (variables: {', '.join(names) or 'none'})")


def _source(path, make, kernels, where, labels, close=lambda: None, matlab=True):
    """:func:`open_kernel_file`'s ``(make(kernels), labels, close)``, checked; a refusal says ``where``."""
    try:
        source = make(kernels)
    except KernelInputError as exc:
        raise KernelInputError(f"{where}: {exc}{_ORDER_HINT if matlab else ''}") from None
    source.origin = str(path)
    return source, check_labels(labels, source.shape[1], f"labels {'Y ' if matlab else ''}in {path}"), close


def open_kernel_file(path: str | os.PathLike[str]) -> tuple:
    """Open a kernel file as a blockwise source.

    Parameters
    ----------
    path : str or Path
        ``.mat`` (v5 or v7.3) with ``KH`` (n x n x m) and optional ``Y``, or ``.npz``
        with ``kernels`` (m, n, n) and optional ``labels``.

    Returns
    -------
    source : ArrayKernelSource or H5KernelSource
    labels : ndarray of shape (n,) or None
    closer : callable
        Closes the underlying file (h5py) when called.

    Raises
    ------
    FileNotFoundError, PermissionError
        Missing or unreadable file.
    KernelInputError
        No ``KH``/``kernels`` variable (the variables present listed), a file that is
        not a MATLAB or npz file or is truncated, ``KH`` complex, sparse, a cell array,
        struct or HDF5 group, non-square kernels, no kernels (m = 0), labels of another
        length or with missing entries. Later errors name the file (``source.origin``).
    """
    path = readable_file(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":  # kernels (m, n, n), optional labels
        kernels, labels = load_arrays(path, "kernels", "labels", f"cannot read {path} as .npz")
        return _source(path, ArrayKernelSource, kernels, f"array 'kernels' in {path}", labels, matlab=False)
    if suffix != ".mat":
        hint = ""
        if path.name.lower().endswith(_FEATURE_FILES):
            hint = (f"; {path.name} looks like a feature file (one sample per row): give it as features "
                    f"(--features {path}; Python: X, y = load_features(path), then LSWMKC(kernel='rbf').fit([X]))")
        raise KernelInputError(f"unknown kernel file type {suffix!r} for {path}: expected .mat or .npz{hint}")
    import h5py

    return _open_h5_kernels(path) if h5py.is_hdf5(path) else _open_mat_kernels(path)


def _open_h5_kernels(path):
    """:func:`open_kernel_file` of a MATLAB v7.3 (HDF5) file: ``KH`` read blockwise, optional ``Y``."""
    import h5py

    try:
        f = h5py.File(path, "r")
    except OSError as exc:  # truncated ("truncated file: eof = ..."), damaged, locked
        raise KernelInputError(f"cannot read {path} as a MATLAB v7.3 (HDF5) file (truncated or damaged?): {exc}") from exc
    try:
        if "KH" not in f:
            raise _no_kh(path, [k for k in f.keys() if not k.startswith("#")])
        kh = _h5_variable(f, path, "KH")
        labels = _h5_read(_h5_variable(f, path, "Y"), (), "Y") if "Y" in f else None
        return _source(path, H5KernelSource, kh, f"variable KH in {path}", labels, f.close)
    except BaseException:
        f.close()
        raise


def _open_mat_kernels(path):
    """:func:`open_kernel_file` of a MATLAB v5 file: ``KH`` (n x n x m), optional ``Y``."""
    import scipy.sparse as sp
    from scipy.io import loadmat, whosmat

    try:
        names = [name for name, _, _ in whosmat(str(path))]
    except Exception as exc:
        raise KernelInputError(f"cannot read {path} as a MATLAB file: {exc}") from exc
    if "KH" not in names:
        raise _no_kh(path, names)
    try:
        data = loadmat(str(path), variable_names=["KH", "Y"])
    except Exception as exc:  # OSError "could not read bytes" (truncated), ValueError, zlib.error ...
        raise KernelInputError(f"cannot read {path} as a MATLAB file (truncated or damaged?): {exc}") from exc
    if sp.issparse(data["KH"]):
        raise KernelInputError(f"variable KH in {path} is a sparse matrix; save the kernels as a full n x n x m array "
                               "(full(KH) in MATLAB)")
    kh = np.asarray(data["KH"])
    _check_variable(path, "KH", kh.dtype)
    return _source(path, ArrayKernelSource, np.moveaxis(kh, 2, 0) if kh.ndim == 3 else kh,
                   f"variable KH in {path} (MATLAB size {kh.shape})", data.get("Y"))


def load_kernels(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray | None]:
    """Read base kernels and labels from a file.

    Parameters
    ----------
    path : str or Path
        ``.mat`` v5 or v7.3 with ``KH`` in MATLAB's ``n x n x m`` order and optional
        ``Y``; or ``.npz`` with ``kernels`` ``(m, n, n)`` and optional ``labels``.

    Returns
    -------
    kernels : ndarray of shape (m, n, n), float64
        The raw base kernels (not yet preprocessed).
    labels : ndarray of shape (n,) or None

    Raises
    ------
    FileNotFoundError, PermissionError, KernelInputError
        See :func:`open_kernel_file`.
    """
    source, labels, close = open_kernel_file(path)
    try:
        return source.rows(0, source.shape[1]), labels
    finally:
        close()


def load_features(
    path: str | os.PathLike[str],
    label_column: int | None = None,
    header: bool | None = None,
    index_columns: int | None = None,
    with_columns: bool = False,
) -> Any:
    """Read one view of features, samples in rows.

    Parameters
    ----------
    path : str or Path
        ``.csv`` or ``.csv.gz`` (comma-separated; semicolon-separated is recognised when
        no comma occurs in the first two lines), ``.npy``, or ``.npz`` with ``X`` (and
        optional ``labels``).
    label_column : int, optional
        Column holding the labels (e.g. ``-1``); it is removed from the features.
    header : bool, optional
        CSV only. True: the first row is a header (skipped); False: it is data. None
        (default): a header if a cell of it is not a number (with ``label_column``: a
        feature cell, or a label cell "label", "class" ...), or if it is pandas' column
        numbers ``0,1,...,d-1`` (d >= 3; with a :class:`~lswmkc_dask.HeaderWarning`).
    index_columns : int, optional
        CSV only. How many leading columns are row indices, dropped. None (default): a
        first column that is a row index is **refused** (as a feature it would carry the
        sample order into the clustering): the row numbers ``0..n-1`` or ``1..n`` in any
        order (n >= 3), or distinct integers under an empty header cell or ``Unnamed: 0``.
        0: nothing is checked. ``label_column`` counts the file's columns, index columns
        included.
    with_columns : bool
        Also return the feature columns' names: a CSV header's cells of the columns kept
        (None without a header line, or for ``.npy``/``.npz``).

    Returns
    -------
    features : ndarray of shape (n, d)
    labels : ndarray of shape (n,) or None
    columns : list of str or None
        With ``with_columns`` only.

    Raises
    ------
    FileNotFoundError, PermissionError
        Missing or unreadable file.
    KernelInputError
        An unreadable file, a non-numeric or missing (empty, ``NA``) cell, rows of
        different lengths, ``label_column`` out of range, labels with missing entries;
        a row index with ``index_columns`` None; ``index_columns`` not an integer >= 0
        or leaving no feature column; a NaN or infinite feature value, or one beyond
        ``lswmkc_dask.kernels.features.FEATURE_MAX_ABS``. The message names the file
        (and the line and column, or the columns).
    """
    path = readable_file(path)
    _check_index_columns(index_columns)
    skip = removed = names = None  # a CSV: header lines skipped, the label column taken out, line 1's cells
    if path.name.lower().endswith((".csv", ".csv.gz")):
        x, labels, skip, removed, names = _read_csv_features(path, label_column, header)
        label_column = None  # taken
    elif path.name.lower().endswith((".npy", ".npz")):
        x, labels = load_arrays(path, "X", "labels", f"cannot read features from {path}", "features")
    else:
        raise KernelInputError(f"unknown feature file type for {path}: expected .csv, .csv.gz, .npy or .npz")
    if np.asarray(x).dtype.kind == "c":
        raise KernelInputError(f"features in {path} are complex; features must be real numbers")
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise KernelInputError(f"features in {path} are not numeric: {exc}") from exc
    if x.ndim != 2:
        raise KernelInputError(f"features in {path} must be 2-D (samples x features), got shape {x.shape}")
    if x.shape[0] == 0:
        raise KernelInputError(f"features in {path}: the file holds no samples")
    if label_column is not None:
        removed, labels, x = _take_label_column(x, label_column, path)
    _check_feature_values(x, path, skip, removed)
    width = x.shape[1]
    if skip is not None:  # a CSV: its leading row-index columns (pandas' DataFrame.to_csv)
        x = _drop_index_columns(x, path, names if skip else None, removed, index_columns)
    labels = check_labels(labels, x.shape[0], f"labels in {path}")
    columns = None
    if skip and names is not None and len(names) == width + (removed is not None):  # the label column's and row-index columns' cells out
        columns = [str(c) for j, c in enumerate(names) if j != removed][width - x.shape[1]:]
    return (x, labels, columns) if with_columns else (x, labels)


class HeaderedView:
    """A feature view read from a CSV with a header: its values and its columns' names, as a
    DataFrame gives them to fit (kept in the model) and to predict (checked against the fit's).
    """

    def __init__(self, values: np.ndarray, columns: list[str]) -> None:
        self.values, self.columns = values, columns
        self.ndim, self.shape = values.ndim, values.shape

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.values, dtype=dtype)


def _read_csv_features(path, label_column, header):
    """(x, labels, skip, removed, names) of a feature CSV: ``skip`` header lines, the label column
    (``removed``, or None) taken out as text (labels may be names), line 1's cells unquoted.
    """
    labels = removed = None
    note = ""  # a likely cause of a failure to read (semicolons with decimal commas)
    try:
        raw = gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")
        with io.TextIOWrapper(raw, encoding="utf-8-sig") as fh:
            first = fh.readline()
            delimiter, note = _delimiter(first, fh.readline(), path)
            skip, names = _csv_header(first, delimiter, label_column, header, path)

            def table(dtype):
                """The lines after the header as an array of ``dtype``."""
                fh.seek(0)
                with warnings.catch_warnings():  # an empty file: "holds no samples" (in load_features)
                    warnings.filterwarnings("ignore", "loadtxt: input contained no data")
                    return np.loadtxt(fh, delimiter=delimiter, skiprows=skip, ndmin=2, dtype=dtype)

            try:  # labels may be names ("setosa"): read as text with a label column
                x = table(float if label_column is None else str)
            except ValueError as exc:
                if label_column is None:  # a cell that is not a number: named (line, column), a missing one as missing
                    try:
                        cells = table(str)
                    except ValueError:
                        pass  # rows of different lengths: numpy's message says where
                    else:
                        _numeric_cells(np.char.strip(cells), None, skip, path)
                why = str(exc).split("; use `usecols`")[0]  # numpy's advice is not for our users
                raise KernelInputError(
                    f"cannot read features from {path}: {why} (numbers separated by commas, one sample per "
                    "line; the first line is a header if it has a non-numeric cell or is the column numbers "
                    "0,1,2,..., or with --header)"
                ) from exc
            if label_column is not None:
                if x.shape[0] == 0:
                    raise KernelInputError(f"features in {path}: the file holds no samples")
                removed, labels, cells = _take_label_column(np.char.strip(x), label_column, path)
                labels = labels.astype(np.float64) if all(is_number(c) for c in labels) else labels
                x = _numeric_cells(cells, removed, skip, path)
    except KernelInputError as exc:
        if note:
            raise KernelInputError(f"{exc}{note}") from exc
        raise
    except Exception as exc:
        raise KernelInputError(f"cannot read features from {path}: {exc}{note}") from exc
    return x, labels, skip, removed, names


def _csv_header(first, delimiter, label_column, header, path):
    """(skip, names) of a feature CSV whose first line is ``first``: 1 when that line is a
    header (:func:`load_features`'s ``header`` rule), else 0; and its cells, unquoted.
    """
    whole = [c.strip() for c in first.strip().split(delimiter)]
    cells = list(whole)
    named = False  # a label may be a name ("setosa"): the feature cells tell, or a label cell naming the column
    if isinstance(label_column, (int, np.integer)) and -len(cells) <= label_column < len(cells):
        named = cells.pop(label_column).lower() in LABEL_HEADERS
    auto = named or not all(is_number(c) for c in cells)
    if header is False and auto:
        raise with_message(
            KernelInputError, "features in {}: line 1 is not numeric ({!r}) but {} was given", path,
            first.strip()[:80], Param("header", False, hint="paren"),
        )
    names = [c.strip('"') for c in whole]
    if header is not None:
        return int(bool(header)), names
    # pandas' header of a frame with default column names: the integers 0..d-1 (d >= 3), skipped and said so
    numbered = 0 if auto else next((len(r) for r in (whole, cells) if len(r) >= 3 and r == list(map(str, range(len(r))))), 0)
    if numbered:
        warn_at_caller(with_message(
            HeaderWarning, "features in {}: line 1 ({}) read as a header, the column numbers 0..{} that pandas' "
            "DataFrame.to_csv writes (if it is a sample, pass {})", path, _shorten(first), numbered - 1,
            Param("header", False, hint="paren"),
        ), HeaderWarning)
    return int(auto or bool(numbered)), names


def _check_index_columns(index_columns):
    if index_columns is not None and (isinstance(index_columns, (bool, np.bool_))
                                      or not isinstance(index_columns, (int, np.integer)) or index_columns < 0):
        raise with_message(KernelInputError, "{} must be an integer >= 0 (the number of leading row-index columns "
                           "of a CSV) or None, got {!r}", Param("index_columns"), index_columns)


#: Header cells pandas writes above an unnamed index: "" (``to_csv``), ``Unnamed: 0`` (read back, written again).
_PANDAS_INDEX_NAME = re.compile(r"(Unnamed: \d+)?")


def _row_index_kind(column, name):
    """What makes ``column`` (float, shape (n,)) a row index, or "": the row numbers ``0..n-1`` or
    ``1..n`` in any order (n >= 3), or distinct integers under the header cell pandas writes
    above an unnamed index (``""``, ``Unnamed: 0``).
    """
    n = column.shape[0]
    starts = [s for s in (0, 1) if n >= 3 and np.array_equal(np.sort(column), np.arange(s, s + n))]  # at most one
    numbers = f"the row numbers {starts[0]}..{starts[0] + n - 1}" if starts else ""
    if starts and np.array_equal(column, np.arange(starts[0], starts[0] + n)):
        return numbers
    if name is not None and _PANDAS_INDEX_NAME.fullmatch(name) and np.array_equal(column, np.round(column)) \
            and np.unique(column).size == n:
        return "distinct integers, one per row"
    return f"{numbers} in another order" if starts else ""


def _drop_index_columns(x, path, names, removed, index_columns):
    """``x`` without the leading row-index columns of a CSV (``load_features``'s ``index_columns``);
    ``names``: the header's cells (or None), ``removed``: the label column taken out of ``x`` (or None).
    """
    if index_columns is None:  # auto: refuse a row index, which would leak the sample order
        found = []
        for j in range(min(2, x.shape[1] - 1)):
            name = names[_in_file(j, removed)] if names is not None and _in_file(j, removed) < len(names) else None
            kind = "" if _in_file(j, removed) != j else _row_index_kind(x[:, j], name)
            if not kind:
                break
            found.append(f"column {j + 1} ({'no header' if name is None else f'header {name!r}'}: {kind})")
        if not found:
            return x
        one = len(found) == 1
        raise with_message(
            KernelInputError, "features in {path}: {found} {be} a row index, as pandas' DataFrame.to_csv writes by "
            "default, not {feature}: read as {feature}, {they} would carry the sample order (and, with samples sorted by "
            "class, the labels) into the clustering. Write the file without it (pandas: {first}to_csv(path, "
            "index=False)), or pass {drop} to drop {it} ({keep} keeps {it} as {feature})", path=path,
            found=" and ".join(found), be="is" if one else "are each", feature="a feature" if one else "features",
            they="it" if one else "they", it="it" if one else "them", first="" if one else "read_csv(path, index_col=0), then ",
            drop=Param("index_columns", len(found), hint="paren"), keep=Param("index_columns", 0, hint="paren"),
        )
    if removed is not None and removed < index_columns:
        raise with_message(KernelInputError, "features in {}: the label column (column {} of the file) is one of the "
                           "first {} columns, which {} drops as row indices", path, removed + 1, index_columns,
                           Param("index_columns", index_columns))
    if index_columns >= x.shape[1]:
        raise with_message(KernelInputError, "features in {}: {} drops all its {} feature column{}: no features left",
                           path, Param("index_columns", index_columns), x.shape[1], "s" * (x.shape[1] != 1))
    return x[:, index_columns:]


def _delimiter(first, second, path):
    """(delimiter, note) of a feature CSV from its first two lines: ``";"`` when they hold semicolons
    and no comma, else ``","``. Semicolons and commas on every line (decimal commas) are refused;
    on one line only, ``note`` says why the read is likely to fail.
    """
    lines = [ln for ln in (first, second) if ln.strip()]
    if not any(";" in ln for ln in lines):
        return ",", ""
    if not any("," in ln for ln in lines):
        return ";", ""
    note = (f"; its lines hold semicolons and commas ({_shorten(lines[-1])!r}), as semicolon-separated values "
            "with decimal commas do: write the file with commas between the values and points as decimal "
            "separators (pandas: to_csv(path, sep=',', decimal='.'))")
    if all(";" in ln for ln in lines):  # every line: the values' separator, not a character of a label
        raise KernelInputError(f"cannot read features from {path}: {note[2:]}")
    return ",", note


def _shorten(line, limit=40):
    line = line.strip()
    return line if len(line) <= limit else line[: limit - 4].rsplit(",", 1)[0] + ",..."


def _in_file(j, removed):
    """Column ``j`` of the features in the file (from 0), the label column ``removed`` (or None) counted back in."""
    return j + (removed is not None and j >= removed)


def _cell(i, j, skip, removed):
    """``"line L, column C"`` (from 1) of the feature cell ``(i, j)`` of a CSV of ``skip`` header lines."""
    return f"line {i + 1 + skip}, column {_in_file(j, removed) + 1}"


#: What to do about a missing (NaN, empty) feature value.
_FILL_IN = "every feature value must be a finite number; fill in or leave out the samples with missing values"


def _check_feature_values(x, path, skip=None, removed=None):
    """Refuse NaN/Inf feature values and values beyond ``FEATURE_MAX_ABS``, naming where: line and column
    (from 1) of a CSV of ``skip`` header lines (the label column ``removed`` counted in), else row, column.
    """
    with np.errstate(invalid="ignore"):
        checks = ((~np.isfinite(x), "is {}", "NaN or infinite value", _FILL_IN),
                  (np.abs(x) > FEATURE_MAX_ABS, f"holds {{:.3g}}, beyond +-{FEATURE_MAX_ABS:.0e}", "such value",
                   TOO_LARGE_FEATURE))
    for bad, holds, what, remedy in checks:
        if bad.any():
            r, c = (int(i) for i in np.argwhere(bad)[0])
            where = f"row {r}, column {_in_file(c, removed)} (from 0)" if skip is None else _cell(r, c, skip, removed)
            count = int(bad.sum())
            raise KernelInputError(f"features in {path}: {where} {holds.format(x[r, c])} ({count} {what}"
                                   f"{'s' * (count > 1)} in all): {remedy}")


def _take_label_column(table, label_column, path):
    """(index, labels, other columns) of ``table``, its labels in column ``label_column``
    (refused unless a column of ``table``, and not its only one).
    """
    d = table.shape[1]
    if not isinstance(label_column, (int, np.integer)) or not -d <= label_column < d:
        raise with_message(
            KernelInputError, "{} {} is out of range for {}, which has {} column{} (give {} .. {}, e.g. -1 for the last)",
            Param("label_column"), label_column, path, d, "s" * (d != 1), -d, d - 1,
        )
    if d < 2:
        raise with_message(KernelInputError, "{} has only the label column ({} {}): no features left", path,
                           Param("label_column"), label_column)
    removed = int(label_column) % d
    return removed, table[:, removed], np.delete(table, removed, axis=1)


#: Cells pandas' ``read_csv`` reads as missing (NaN); ``to_csv`` writes NaN as an empty cell.
_MISSING = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
            "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


def _numeric_cells(cells, removed, skip, path):
    """The feature cells of a CSV as float64; a cell that is not a number (or missing: empty, ``NA``
    ...) is named by its line and column in the file (``removed``: the label column taken out, or None).
    """
    try:
        return cells.astype(np.float64)
    except ValueError:
        for (i, j), cell in np.ndenumerate(cells):
            if is_number(cell):
                continue
            if cell in _MISSING:
                count = int(np.isin(cells, _MISSING).sum())
                raise KernelInputError(
                    f"features in {path}: {_cell(i, j, skip, removed)} (from 1) is {repr(str(cell)) if cell else 'empty'}"
                    f", a missing value ({count} missing value{'s' * (count > 1)} in all): {_FILL_IN}"
                ) from None
            raise KernelInputError(
                f"cannot read features from {path}: {_cell(i, j, skip, removed)}: {str(cell)[:40]!r} is not a number"
            ) from None
        raise
