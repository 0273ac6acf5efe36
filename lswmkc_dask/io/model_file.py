"""A fitted :class:`lswmkc_dask.LSWMKC` in a portable, pickle-free safetensors file.

* tensors: ``labels_`` (n,), ``kernel_weights_`` (m,) omega of Eq. (12), ``kstar_factor_``
  (n, r) W with K* = W W^T (Theorem 2), ``embedding_`` (n, k), ``gamma_`` (n,) of Eq. (27),
  ``objective_`` and ``kstar_change_`` (n_iter_,), Z in CSR parts ``affinity_data``,
  ``affinity_indices``, ``affinity_indptr``; the timings and :data:`PREDICT` when present; per kept
  snapshot iteration t (``snapshot_iterations``) Z_t in CSR parts ``snapshot<t>_data``, ``_indices``,
  ``_indptr``, W_t ``snapshot<t>_factor`` (none at t = 0) and omega_t ``snapshot<t>_weights``; a sweep
  run's per-sample silhouettes ``silhouette_samples`` (one row per k, ascending) once scored;
* metadata: ``format`` (:data:`FORMAT`), ``format_version``, ``lswmkc_dask_version``,
  ``written_by``, ``created_utc``, ``params`` (JSON, without ``client``); and as JSON values
  ``affinity_shape`` and the scalars and names of :data:`REQUIRED` and :data:`OPTIONAL`.

:func:`save_model` writes it atomically; :func:`load_model` trusts nothing in it, nor do the readers of
a run's arrays (:mod:`lswmkc_dask.io.run_arrays`, by :func:`open_members`): every array a run keeps.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import warnings
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy
import scipy.sparse as sp

from .._validate import validate
from .._version import __version__
from ..errors import ModelFileError, ModelVersionError
from ..predict_math import PredictState, identity_problem, state_problem
from .integrity.files import open_regular, parse_json
from .npz import EXPANSION_FLOOR, check_array, damaged, nonfinite
from .output import atomic_path, signature, utc_now

#: The ``format`` metadata entry of every model file.
FORMAT = "lswmkc-model"
#: Format version written by this package.
FORMAT_VERSION = 2
#: Name of the model file in a fit's or a sweep run's directory (``lswmkc fit --output DIR``).
MODEL_FILE = "model.safetensors"
#: The member of a sweep run's per-sample silhouettes, shape (number of k, n).
SILHOUETTES = "silhouette_samples"

#: Fitted attributes every model file holds (besides Z, written in CSR parts).
REQUIRED = ("labels_", "kernel_weights_", "kstar_factor_", "embedding_", "gamma_", "objective_", "kstar_change_",
            "n_iter_", "converged_", "n_clusters_")
#: Attributes written when the model has them (a model of a sweep may lack some).
OPTIONAL = ("n_features_in_", "kernel_names_", "fit_seconds_", "iteration_seconds_", "eig_seconds_", "eig_threads_",
            "eig_drivers_", "kstar_rank_", "n_restarts_", "execution_")
#: What :meth:`LSWMKC.predict` needs (``lswmkc_dask.predict.PREDICT_STATE``), written when the model has it:
#: arrays, and per feature view ``NAME<v>`` for the lists of :data:`_PER_VIEW`.
PREDICT = ("kernel_col_means_", "kernel_diag_", "kernel_index_", "n_kernels_in_", "feature_bandwidths_",
           "cluster_centers_")
_PER_VIEW = ("train_features_", "feature_means_", "feature_scales_")
#: What identifies each feature view (JSON metadata, with the prediction state of a features model): one
#: name per view ("" unknown) and one list of column names per view ([] unknown). Files without them load.
_VIEW_TEXT = ("view_names_", "view_columns_")
#: Attributes held as arrays of Python strings (object dtype) by a fitted model.
_TEXT_ARRAYS = ("kernel_names_", "eig_drivers_")
#: Scalars and their Python type on a loaded model.
_SCALARS = {"n_iter_": int, "converged_": bool, "n_clusters_": int, "n_features_in_": int, "fit_seconds_": float,
            "n_restarts_": int, "execution_": str, "n_kernels_in_": int}
#: The parts of a CSR matrix, each a member ``PREFIX<part>`` (Z's prefix ``affinity_``, Z_t's ``snapshot<t>_``).
_CSR = ("data", "indices", "indptr")
_AFFINITY = ("affinity_data", "affinity_indices", "affinity_indptr", "affinity_shape")
#: Metadata entries held as plain text (the others are JSON values).
_TEXT = ("format", "lswmkc_dask_version", "written_by", "created_utc", "params")
#: Parameters never written (a live client; its address is no property of the model).
_NOT_SAVED = ("client",)
#: Every member of the format; others are left out.
_KNOWN_MEMBERS = (*_TEXT, "format_version", *REQUIRED, *OPTIONAL, *_AFFINITY, *PREDICT, *_VIEW_TEXT, SILHOUETTES)
#: Members per feature view (``train_features_0``, ...) and per snapshot iteration (``snapshot3_data``, ...).
_VIEW_MEMBER = re.compile(f"({'|'.join(_PER_VIEW)})([0-9]+)")
SNAPSHOT_MEMBER = re.compile("snapshot([0-9]+)_(data|indices|indptr|factor|weights)")
#: The longest header read (the JSON before the tensors' bytes).
MAX_HEADER_BYTES = EXPANSION_FLOOR
#: Unknown members (or parameters) named in the warning that lists them; the rest are counted.
LISTED = 5
#: Rows of Z must sum to 1 within this (they lie on the simplex, Theorem 1).
SIMPLEX_TOL = 1e-6
#: The kernel weights must have unit 2-norm (Eq. 12) within this.
NORM_TOL = 1e-6
#: Bytes of each safetensors dtype (to name the tensor whose offsets do not match its shape).
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4,
             "U16": 2, "U8": 1, "BOOL": 1, "C64": 8}

#: How a parameter's value of each type becomes plain JSON (the first type that fits; bool before int).
_JSON_TYPES = (((str, bool, type(None)), lambda name, v: v), (np.bool_, lambda name, v: bool(v)),
               (numbers.Integral, lambda name, v: int(v)), (numbers.Real, lambda name, v: float(v)),
               (dict, lambda name, v: {str(k): _json_value(f"{name}[{k!r}]", x) for k, x in v.items()}),
               ((list, tuple), lambda name, v: [_json_value(f"{name}[{i}]", x) for i, x in enumerate(v)]))

#: What a file that is no model file is, by its first bytes.
_FOREIGN = ((b"\x93NUMPY", "a single NumPy array"), (b"\x80", "a pickle, which is never loaded"),
            (b"PK\x03\x04", "a NumPy .npz archive"))


def _json_value(name, value):
    """``value`` as plain JSON types; a parameter that has none is refused, by name."""
    for types, convert in _JSON_TYPES:
        if isinstance(value, types):
            return convert(name, value)
    raise TypeError(f"parameter {name}={value!r} cannot be written to a portable model file (only numbers, text, "
                    "None, lists and dicts of them); set it to such a value (e.g. an int random_state) before saving")


def model_contents(fitted: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The tensors and metadata of a model's file (see the module's table).

    Parameters
    ----------
    fitted : mapping of str to object
        The fitted attributes by name (``labels_``, ...): a fitted :class:`LSWMKC`'s ``vars``, or
        :meth:`~lswmkc_dask.records.LSWMKCResult.fitted_attributes` of a fit's record (a sweep's
        grid point); with ``snapshots_`` when kept. Names the format does not hold are left out.
    params : mapping of str to object
        The :class:`LSWMKC` parameters (``get_params``); ``client`` is left out.

    Returns
    -------
    tensors : dict of str -> ndarray
        Numeric arrays, C-contiguous.
    metadata : dict of str -> str

    Raises
    ------
    sklearn.exceptions.NotFittedError
        ``fitted`` lacks one of the fitted attributes.
    TypeError
        A parameter cannot be written as JSON (a ``RandomState`` as ``random_state``).
    """
    from sklearn.exceptions import NotFittedError

    missing = [a for a in (*REQUIRED, "affinity_") if a not in fitted]
    if missing:
        raise NotFittedError(f"this LSWMKC is not fitted (no {', '.join(missing)}): call fit before saving it")
    params = {k: _json_value(k, v) for k, v in params.items() if k not in _NOT_SAVED}
    z = sp.csr_matrix(fitted["affinity_"])
    metadata = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "lswmkc_dask_version": __version__,
                "written_by": signature(), "created_utc": utc_now(), "params": json.dumps(params, sort_keys=True),
                "affinity_shape": json.dumps(list(z.shape))}
    tensors = {f"affinity_{part}": getattr(z, part) for part in _CSR}
    for t, (z_t, w_t, omega_t) in (fitted.get("snapshots_") or {}).items():
        z_t = sp.csr_matrix(z_t)
        tensors.update({f"snapshot{t}_{part}": getattr(z_t, part) for part in _CSR}, **{f"snapshot{t}_weights": omega_t})
        if w_t is not None:
            tensors[f"snapshot{t}_factor"] = w_t
    predict = fitted.get("kernel_col_means_") is not None  # the prediction state (a model of a store has none)
    for name in (*REQUIRED, *OPTIONAL, *(PREDICT if predict else ())):
        if name not in fitted or (name in PREDICT and fitted[name] is None):
            continue
        value = fitted[name]
        if name in _TEXT_ARRAYS:
            metadata[name] = json.dumps([str(v) for v in value])
        elif name in _SCALARS:
            metadata[name] = json.dumps(_SCALARS[name](value))
        else:
            a = np.asarray(value)
            if a.dtype == object:
                raise TypeError(f"fitted attribute {name} holds Python objects and cannot be written without pickle")
            tensors[name] = a
    if predict:
        tensors.update({f"{name}{v}": a for name in _PER_VIEW for v, a in enumerate(fitted.get(name) or ())})
        if fitted.get("train_features_") is not None:
            metadata.update({name: json.dumps(fitted[name]) for name in _VIEW_TEXT if fitted.get(name) is not None})
    return {k: np.ascontiguousarray(v) for k, v in tensors.items()}, metadata


def write_model(path: str | os.PathLike[str], fitted: Mapping[str, Any], params: Mapping[str, Any]) -> Path:
    """Write the file of ``fitted`` and ``params`` (:func:`model_contents`) to ``path`` (returned), not
    atomically (:func:`save_model` does).
    """
    _write(path, *model_contents(fitted, params))
    return Path(path)


def _write(path, tensors, metadata):
    with open(path, "wb") as fh:
        fh.write(safetensors.numpy.save(tensors, metadata))
        fh.flush()
        os.fsync(fh.fileno())


def save_model(fitted: Mapping[str, Any], params: Mapping[str, Any], path: str | os.PathLike[str],
               overwrite: bool = False) -> Path:
    """Write a model's file to ``path`` atomically (temporary sibling, then rename).

    Parameters
    ----------
    fitted, params : mapping of str to object
        The fitted attributes and the parameters, as :func:`model_contents` takes them.
    path : str or Path
        The model file (the name is kept as given).
    overwrite : bool
        Replace an existing lswmkc model file (never another file, a directory or a link).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False, or (``ForeignOutputError``) is a directory, a link or a
        special file.
    ProtectedOutputError
        ``path`` lies inside a kernel store (a ``ValueError``); nothing is written.
    sklearn.exceptions.NotFittedError, TypeError
        ``fitted`` is not a fitted model's; a parameter cannot be written as JSON.
    """
    contents = model_contents(fitted, params)  # before anything is created: an unfitted model leaves nothing
    with atomic_path(path, overwrite=overwrite) as tmp:
        _write(tmp, *contents)
    return Path(path)


def _resolve(path):
    path = Path(path)
    if path.is_dir():
        if (path / MODEL_FILE).exists():
            return path / MODEL_FILE
        if (path / "sweep.json").is_file():  # a sweep keeps one model per run, in runs/NAME/
            raise FileNotFoundError(f"{path} is a sweep directory, which holds no model: give one of its runs "
                                    f"({path}/runs/NAME, each holds its {MODEL_FILE}), or fit the grid point it chose "
                                    f"(selected_model({str(path)!r}).fit(X).save(FILE))")
        raise FileNotFoundError(f"{path} is a directory without a model file {MODEL_FILE} (a fit's output directory "
                                "written by `lswmkc fit --output` holds one); give the model file or such a directory")
    if not path.exists():
        raise FileNotFoundError(f"model file not found: {path}")
    return path


def _not_a_model(path, why):
    return ModelFileError(f"{path} is not an lswmkc model file ({why}); model files are written by LSWMKC.save or "
                          f"`lswmkc fit --output DIR` (DIR/{MODEL_FILE})")


def _unique(pairs):
    """A JSON object's pairs as a dict; a name found twice is refused (readers differ on which they take)."""
    twice = [(key, count) for key, count in Counter(key for key, _ in pairs).items() if count > 1]
    if twice:
        raise ModelFileError(f"member {twice[0][0]!r} appears {twice[0][1]} times in the header (readers differ on "
                             "which copy they take)")
    return dict(pairs)


def _header(path, fh):
    """The metadata and the tensors' entries of the header at the start of ``fh``, and the header's bytes."""
    fh.seek(0)
    head = fh.read(8)
    size = int.from_bytes(head, "little") if len(head) == 8 else -1
    if not 2 <= size <= MAX_HEADER_BYTES:
        raise _not_a_model(path, next((why for magic, why in _FOREIGN if head.startswith(magic)),
                                      "not a safetensors file"))
    raw = fh.read(size)
    if raw[:1] != b"{":
        raise _not_a_model(path, "not a safetensors file")
    try:
        header = json.loads(raw, object_pairs_hook=_unique)
    except ModelFileError as exc:
        raise ModelFileError(f"{path}: {exc}; {damaged(ModelFileError)}") from None
    except (ValueError, RecursionError) as exc:
        raise ModelFileError(f"{path} is damaged: its header is not readable JSON ({str(exc)[:80]}); "
                             f"{ModelFileError.remedy}") from None
    metadata = header.pop("__metadata__", None) if isinstance(header, dict) else None
    if not isinstance(metadata, dict) or "format" not in metadata:
        raise _not_a_model(path, "a safetensors file without a 'format' entry in its metadata")
    return metadata, header, head + raw


def _read_file(path):
    """The metadata, the tensors and the parameters (checked) of the model file ``path``, read once."""
    with open_regular(path, ModelFileError) as fh:
        try:
            metadata, entries, head = _header(path, fh)
            params = _check_format(path, metadata)
            data = fh.read()
        except OSError as exc:
            raise _not_a_model(path, exc.strerror or str(exc)) from None
    try:
        tensors = safetensors.numpy.load(head + data)
    except Exception as exc:  # safetensors' SafetensorError: the header lies about the tensors
        name, why = _lie(entries, len(data))
        raise ModelFileError(f"{path}{f': member {name!r}' if name else ''} {why} ({exc}); "
                             f"{damaged(ModelFileError)}") from None
    return metadata, tensors, params


def _lie(entries, size):
    """The tensor whose entry does not match the data (``size`` bytes) and why; (None, why) if none alone."""
    for name, entry in entries.items():
        try:
            begin, end = (int(x) for x in entry["data_offsets"])
            shape = tuple(int(d) for d in entry["shape"])
            nbytes = math.prod(shape) * _ITEMSIZE[entry["dtype"]]
        except (TypeError, ValueError, KeyError, AttributeError):
            return name, "has an unreadable entry in the header"
        if not 0 <= begin <= end <= size:
            return name, f"declares bytes {begin} to {end}, beyond the {size} bytes of data (truncated?)"
        if nbytes != end - begin:
            return name, f"declares shape {shape} of {entry['dtype']} ({nbytes} bytes) but holds {end - begin} bytes"
    return None, "is not a valid safetensors file"


def _fail(path, name, why):
    return ModelFileError(f"{path}: member {name!r} {why}; {damaged(ModelFileError)}")


def _json(path, name, text, obj=False):
    """The JSON value of metadata entry ``name`` (:func:`~lswmkc_dask.io.integrity.files.parse_json`; an object
    when ``obj``).
    """
    return parse_json(text, lambda why: _fail(path, name, why), obj=obj)


class _Members:
    """The members of a model file (tensors, and metadata entries as JSON values), each checked when asked for;
    :attr:`params`, its parameters (a JSON object).
    """

    def __init__(self, path, metadata, tensors, params):
        self.path, self.metadata, self.tensors, self.params = path, metadata, tensors, params
        both = sorted(set(metadata) & set(tensors))
        if both:
            raise self.fail(both[0], "is both a tensor and a metadata entry")

    def __contains__(self, name):
        return name in self.tensors or name in self.metadata

    def names(self):
        return [*self.tensors, *self.metadata]

    def fail(self, name, why):
        return _fail(self.path, name, why)

    def get(self, name, kinds, shape=(), check=None):
        """Member ``name`` (``kinds``, ``shape`` as :func:`~lswmkc_dask.io.npz.check_array`); ``check(value)``
        says why it is refused, or None.
        """
        if name not in self:
            raise self.fail(name, "is missing")
        value = self.tensors.get(name)
        if value is None:
            value = np.asarray(_json(self.path, name, self.metadata[name]))
            if value.size == 0:
                value = value.astype({"U": str, "i": np.int64}.get(kinds[0], np.float64))
        problem = check_array(value, kinds, shape) or (check(value) if check is not None else None)
        if problem:
            raise self.fail(name, problem)
        return value

    def scalar(self, name, kinds, low=None, high=None):
        value = self.get(name, kinds)[()].item()
        if low is not None and not low <= value <= high:
            raise self.fail(name, f"is {value!r}, outside [{low}, {high}]")
        return value


def _check_format(path, metadata):
    """The format, the version and the parameters of the metadata, before any tensor is read."""
    fmt = metadata["format"]
    if fmt != FORMAT:
        raise _not_a_model(path, f"its format is {str(fmt)[:80]!r}, not {FORMAT!r}")
    version = _json(path, "format_version", metadata.get("format_version", "0"))
    if not isinstance(version, int) or version < 1:
        raise _fail(path, "format_version", f"is {str(version)[:40]}; format versions start at 1")
    if version > FORMAT_VERSION:
        raise ModelVersionError(
            f"{path} is an lswmkc model file of format version {version} (written by lswmkc-dask "
            f"{str(metadata.get('lswmkc_dask_version', '?'))[:40]}); this lswmkc-dask {__version__} reads format "
            f"versions up to {FORMAT_VERSION}: upgrade lswmkc-dask to load it"
        )
    return _json(path, "params", metadata.get("params", "{}"), obj=True)


# --- the checks of single members: why the array is refused, or None ---------------------------------

def _within(low, high):
    """The check of integers, each in [low, high]."""
    return lambda a: (f"has values outside [{low}, {high}] (from {int(a.min())} to {int(a.max())})"
                      if a.size and (int(a.min()) < low or int(a.max()) > high) else None)


def _kstar_change(a):
    return nonfinite(a[1:]) or (None if a.size == 0 or np.isnan(a[0]) or np.isfinite(a[0]) else nonfinite(a[:1]))


def _unit_norm(a):
    norm = float(np.linalg.norm(a))
    return nonfinite(a) or (None if abs(norm - 1.0) <= NORM_TOL else f"has 2-norm {norm:.12g}, not 1 (Eq. 12)")


def kstar_bound(n: int) -> Any:
    """The check of W (n, r), finite, at most n columns (for ``get`` of :func:`open_members`): each K*_ii = ||W[i, :]||^2 is at most the largest eigenvalue of S = (Z + Z^T)/2, at most
    ||Z||_2 <= sqrt(||Z||_1 ||Z||_inf) <= sqrt(n) for rows on the simplex.
    """
    bound = math.sqrt(n) * (1 + NORM_TOL)

    def check(w):
        why = nonfinite(w)
        if why or w.shape[1] > n:
            return why or f"has {w.shape[1]} columns, more than n = {n} (W has one per positive eigenvalue of K*)"
        with np.errstate(over="ignore"):
            diag = np.einsum("ij,ij->i", w, w, dtype=np.float64)
        i = int(np.argmax(diag))
        if not diag[i] <= bound:
            return (f"row {i} has squared norm {diag[i]:.6g} (K*_ii of K* = W W^T), above sqrt(n) = {math.sqrt(n):.6g}, "
                    "the most a neighbourhood kernel of a graph with rows on the simplex holds (Theorem 2)")
        return None
    return check


def _non_negative(a):
    low = np.flatnonzero(a < 0)
    return nonfinite(a) or (f"has {low.size} negative value{'s' if low.size > 1 else ''} (sample {int(low[0])}: "
                          f"{float(a[low[0]]):g}); gamma_i of Eq. (27) is >= 0" if low.size else None)


def _positive(a):
    bad = np.flatnonzero(~(a.ravel() > 0))
    return f"has {bad.size} value{'s' if bad.size > 1 else ''} not above 0 (NaN included)" if bad.size else None


def _no_negative(a):  # a bandwidth: 0 for a constant view (its kernel all ones)
    return nonfinite(a) or ("has negative values" if np.any(a < 0) else None)


def _no_nan(a):
    return "has NaN values" if np.isnan(a).any() else None  # inf: the centroid of an empty cluster


def _read_attributes(members):
    """The fitted attributes, each checked against n (samples), m (kernels), k (``n_clusters_``), ``n_iter_``."""
    labels = members.get("labels_", "i", (None,))
    n = labels.shape[0]
    if n < 1:
        raise members.fail("labels_", "is empty (no samples)")
    t = int(members.scalar("n_iter_", "i", 0, 2**31 - 1))
    k = int(members.scalar("n_clusters_", "i", 2, n - 1))  # as fit accepts it
    why = _within(0, k - 1)(labels)
    if why:
        raise members.fail("labels_", f"{why}, but n_clusters_ is {k}: labels number the clusters from 0 to {k - 1}")
    out = {"labels_": labels, "n_iter_": t, "n_clusters_": k, "converged_": bool(members.scalar("converged_", "b")),
           "kernel_weights_": members.get("kernel_weights_", "f", (None,), _unit_norm)}
    m = out["kernel_weights_"].shape[0]
    out["affinity_"] = affinity_member(members, n)
    for name, shape, check in (("kstar_factor_", (n, None), kstar_bound(n)), ("embedding_", (n, None), nonfinite),
                               ("gamma_", (n,), _non_negative), ("objective_", (t,), nonfinite),
                               ("kstar_change_", (t,), _kstar_change)):
        out[name] = members.get(name, "f", shape, check)
    if out["embedding_"].shape[1] != k:
        raise members.fail("embedding_", f"has {out['embedding_'].shape[1]} columns, but n_clusters_ is {k} (the "
                                         "spectral embedding has one column per cluster)")
    optional = {"kernel_names_": ("U", (m,)), "eig_drivers_": ("U", (None,)), "iteration_seconds_": ("f", (None,)),
                "eig_seconds_": ("f", (None,)), "eig_threads_": ("i", (None,)), "kstar_rank_": ("i", (None,)),
                "n_features_in_": ("i", ()), "fit_seconds_": ("f", ()), "n_restarts_": ("i", ()),
                "execution_": ("U", ())}
    for name, (kinds, shape) in optional.items():
        if name in members:
            value = members.get(name, kinds, shape)
            out[name] = (np.asarray([str(v) for v in value], dtype=object) if name in _TEXT_ARRAYS
                         else _SCALARS[name](value[()]) if name in _SCALARS else value)
    if out.get("n_features_in_", n) != n:
        raise members.fail("n_features_in_", f"is {out['n_features_in_']}, but labels_ has n = {n} samples")
    if any(x in members for x in PREDICT) or any(_VIEW_MEMBER.fullmatch(x) for x in members.names()):
        out.update(_predict_state(members, n, m, k))
    return out


def affinity_member(members: Any, n: int) -> sp.csr_matrix:
    """Z (n, n) from its CSR parts in ``members`` (:func:`open_members`), rows on the simplex (Theorem 1)
    within :data:`SIMPLEX_TOL`, zero diagonal; a ``ModelFileError`` naming the member otherwise.
    """
    shape = members.get("affinity_shape", "i", (2,))
    if shape.tolist() != [n, n]:
        raise members.fail("affinity_shape", f"is {tuple(shape.tolist())}, expected ({n}, {n}) for {n} samples")
    return csr_member(members, "affinity_", n, SIMPLEX_TOL)


def csr_member(members: Any, prefix: str, n: int, simplex: float | None = None) -> sp.csr_matrix:
    """The n x n CSR matrix of members ``PREFIXdata``, ``_indices``, ``_indptr``, checked in full
    (``check_format(full_check=True)``, its data finite; with ``simplex``, each row on the probability simplex
    within it, entries >= 0 summing to 1, and a zero diagonal, as Z's); a ``ModelFileError`` naming them.
    """
    names = [f"{prefix}{part}" for part in _CSR]
    data, indices, indptr = (members.get(name, "fi"[i > 0], (None,)) for i, name in enumerate(names))
    try:
        z = sp.csr_matrix((data, indices, indptr), shape=(n, n))
        z.check_format(full_check=True)
    except ValueError as exc:
        why: str | None = " ".join(str(exc).split()) or type(exc).__name__
    else:
        bad = int(np.count_nonzero(~np.isfinite(z.data)))
        why = f"{bad} values are not finite" if bad else None if simplex is None else _simplex_problem(z, simplex)
    if why:
        raise ModelFileError(f"{members.path}: members {', '.join(map(repr, names))} do not form a {n} x {n} CSR "
                             f"matrix{' with rows on the simplex' if simplex else ''} ({why}); "
                             f"{damaged(ModelFileError)}")
    return z


def _simplex_problem(z, tol):
    """Why the rows of ``z`` are not on the probability simplex within ``tol`` with a zero diagonal, or None."""
    if z.nnz and float(z.data.min()) < -tol:
        row = int(np.searchsorted(z.indptr, int(np.argmin(z.data)), side="right")) - 1
        return f"row {row} has a negative entry {float(z.data.min()):g}"
    sums = np.asarray(z.sum(axis=1)).ravel()
    off = np.flatnonzero(np.abs(sums - 1.0) > tol)
    if off.size:
        return f"row {int(off[0])} sums to {sums[off[0]]:.12g}, not 1"
    diag = np.flatnonzero(z.diagonal())
    if diag.size:
        return f"the diagonal entry of row {int(diag[0])} is not 0"
    return None


def _increasing(m_in):
    return lambda a: _within(0, m_in - 1)(a) or (f"is {a.tolist()[:8]}, not increasing positions among the {m_in} "
                                                 "input kernels (a kernel kept twice?)" if np.any(np.diff(a) <= 0)
                                                 else None)


def _predict_state(members, n, m, k):
    """What predict needs, every member of it present: the kept kernels' column means and centred diagonals
    (m, n; > 0), which input kernels were kept (increasing), the centroids (k, k), per feature view (one per
    input kernel) the z-scored training features (n, d_v), their means, scales (> 0) and bandwidths (>= 0:
    0 for a constant view), and what identifies the views (:data:`_VIEW_TEXT`).
    """
    m_in = int(members.scalar("n_kernels_in_", "i", m, 2**31 - 1))
    out = {"n_kernels_in_": m_in, "kernel_col_means_": members.get("kernel_col_means_", "f", (m, n), nonfinite),
           "kernel_diag_": members.get("kernel_diag_", "f", (m, n), _positive),
           "kernel_index_": members.get("kernel_index_", "i", (m,), _increasing(m_in)),
           "cluster_centers_": members.get("cluster_centers_", "f", (k, k), _no_nan)}
    views = 1 + max((int(x[2]) for x in map(_VIEW_MEMBER.fullmatch, members.names()) if x), default=-1)
    if views and views != m_in:
        raise members.fail("n_kernels_in_", f"is {m_in}, but the file holds training features of {views} views "
                                            "(one kernel per view)")
    out["feature_bandwidths_"] = members.get("feature_bandwidths_", "f", (views,), _no_negative) if views else None
    out.update({name: [] if views else None for name in _PER_VIEW})
    for v in range(views):
        x = members.get(f"train_features_{v}", "f", (n, None), nonfinite)
        out["train_features_"].append(x)
        out["feature_means_"].append(members.get(f"feature_means_{v}", "f", (x.shape[1],), nonfinite))
        out["feature_scales_"].append(members.get(f"feature_scales_{v}", "f", (x.shape[1],), _positive))
    if views:
        out.update(_view_text(members, [x.shape[1] for x in out["train_features_"]]))
    return out


def _view_text(members, widths):
    """``view_names_`` and ``view_columns_`` (:data:`_VIEW_TEXT`), checked; unknown ("", []) where absent."""
    out = {"view_names_": [""] * len(widths), "view_columns_": [[] for _ in widths]}
    for name in _VIEW_TEXT:
        if name in members.tensors:
            raise members.fail(name, "is a tensor, not a JSON metadata entry")
        if name in members.metadata:
            out[name] = _json(members.path, name, members.metadata[name])
            why = identity_problem(name, out[name], widths)
            if why:
                raise members.fail(name, why)
    return out


def _check_state(members, model):
    """A features model's statistics against its training features
    (:func:`lswmkc_dask.predict_math.state_problem`), after its parameters were checked.
    """
    if model.kernel == "precomputed":
        raise members.fail("params", "give kernel='precomputed', but the file holds the training features of "
                                     "a model fitted on feature views")
    problem = state_problem(PredictState.of(model), model.kernel_index_)
    if problem:
        raise members.fail(*problem)


def _check_params(members, model, attributes):
    """The parameters as :meth:`LSWMKC.fit` checks them (on entry and against n), and against ``n_clusters_``
    and (for a scalar gamma) ``gamma_``.
    """
    params = model.get_params(deep=False)
    k, gamma = attributes["n_clusters_"], attributes["gamma_"]
    try:
        validate("LSWMKC", params, caller=type(model).__name__)
        validate("LSWMKC", dict(params, n_clusters=k), attributes["labels_"].shape[0])
    except (ValueError, TypeError) as exc:
        raise members.fail("params", f"holds a parameter LSWMKC does not accept ({str(exc).rstrip('.')})") from None
    if params["n_clusters"] is not None and params["n_clusters"] != k:
        raise members.fail("n_clusters_", f"is {k}, but the parameters give n_clusters = {params['n_clusters']}")
    if params["gamma"] != "auto" and not np.all(gamma == float(params["gamma"])):
        i = int(np.flatnonzero(gamma != float(params["gamma"]))[0])
        raise members.fail("gamma_", f"is {float(gamma[i]):g} at sample {i}, but the parameters give one scalar "
                                     f"gamma = {params['gamma']!r} for every sample")


def _listed(names):
    """``names`` for a one-line warning: the first :data:`LISTED` (each cut to 60 characters), then a count."""
    shown = [(name if name.isprintable() else ascii(name))[:60] for name in names[:LISTED]]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more ({len(names)} in all)" if more else "")


def load_model(path: str | os.PathLike[str], cls: type) -> Any:
    """Read a model written by :func:`save_model` (or ``lswmkc fit --output DIR``).

    Nothing in the file is trusted: each member's dtype and shape against the others (n, m,
    ``n_iter_``), then its values: scalars in range, arrays finite, labels in ``[0, n_clusters_)``,
    unit-norm weights, ``gamma_`` >= 0, K*_ii <= sqrt(n), Z's CSR parts in full with rows on the
    simplex (:data:`SIMPLEX_TOL`), the parameters as :meth:`LSWMKC.fit` checks them, a prediction
    state complete and consistent (:func:`lswmkc_dask.predict_math.state_problem`).

    Parameters
    ----------
    path : str or Path
        A model file, or a fit's output directory holding ``model.safetensors``.
    cls : type
        The estimator class to build (:meth:`LSWMKC.load` passes itself).

    Returns
    -------
    LSWMKC
        With its parameters (``client=None``) and fitted attributes (:meth:`LSWMKC.evaluate` runs).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist, or is a directory without ``model.safetensors``.
    ModelVersionError
        A format version newer than :data:`FORMAT_VERSION` (a ``ValueError`` naming both).
    ModelFileError
        Not an lswmkc model file (a pickle, an ``.npz``, a FIFO ...), or damaged or made
        up (a member missing, unreadable, twice, of the wrong dtype or shape, not finite,
        out of range, at odds with another or with ``fit``); a ``ValueError`` naming the
        file and the member.

    Warns
    -----
    UserWarning
        Parameters or members this version does not know (left out; the first
        :data:`LISTED` named, the rest counted).
    """
    members = open_members(path)
    path, params = members.path, members.params
    missing = [k for k in ("params", *REQUIRED, *_AFFINITY) if k not in members]
    if missing:
        raise ModelFileError(f"{path} is an incomplete lswmkc model file: no {', '.join(missing)}")
    attributes = _read_attributes(members)
    known = set(cls().get_params(deep=False)) - set(_NOT_SAVED)  # a client is never taken from a file
    for what, unknown in (("members", sorted(x for x in set(members.names()) - set(_KNOWN_MEMBERS)
                                             if not (_VIEW_MEMBER.fullmatch(x) or SNAPSHOT_MEMBER.fullmatch(x)))),
                          ("parameters", sorted(set(params) - known))):
        if unknown:
            warnings.warn(f"{path} holds {what} this lswmkc-dask does not know, left out: {_listed(unknown)}",
                          UserWarning, stacklevel=3)
    model = cls(**{k: v for k, v in params.items() if k in known})
    _check_params(members, model, attributes)
    for name, value in attributes.items():
        setattr(model, name, value)
    if attributes.get("train_features_") is not None:
        _check_state(members, model)
    return model


def open_members(path: str | os.PathLike[str]) -> Any:
    """The members of the model file ``path`` (or its run directory), each checked when asked for
    (``get(name, kinds, shape, check)``, as :func:`load_model`); raises as :func:`load_model`.
    """
    path = _resolve(path)
    return _Members(path, *_read_file(path))


def member_names(path: str | os.PathLike[str]) -> set[str]:
    """The member names of the model file ``path`` (or its run directory), from its header alone."""
    path = _resolve(path)
    with open_regular(path, ModelFileError) as fh:
        metadata, entries, _ = _header(path, fh)
    return {*metadata, *entries}


def add_members(path: str | os.PathLike[str], tensors: dict[str, np.ndarray]) -> None:
    """Add (or replace) ``tensors`` in the model file ``path`` (or its run directory), atomically."""
    members = open_members(path)
    with atomic_path(members.path, overwrite=True) as tmp:
        _write(tmp, {**members.tensors, **{k: np.ascontiguousarray(v) for k, v in tensors.items()}}, members.metadata)
