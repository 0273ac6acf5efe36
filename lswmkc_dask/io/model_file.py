"""A fitted :class:`lswmkc_dask.LSWMKC` in a portable, pickle-free file.

One NumPy ``.npz`` archive (:func:`numpy.savez`, uncompressed), every member a plain
numeric or text array, so that ``numpy.load(path, allow_pickle=False)`` reads it
(NumPy alone, in any language with an ``.npy`` reader) and no Python object is ever
unpickled:

* ``format``: ``"lswmkc-model"``, what the file is; ``format_version``: an int,
  :data:`FORMAT_VERSION` when written; ``lswmkc_dask_version``, ``written_by``
  (``"lswmkc-dask <version>"``), ``created_utc`` (ISO 8601);
* ``params``: the estimator's parameters (``get_params`` without ``client``) as JSON
  text;
* ``labels_`` (n,), ``kernel_weights_`` (m,) omega of Eq. (12), ``kernel_names_`` (m,)
  text;
* Z (``affinity_``) in CSR parts: ``affinity_data`` (nnz,), ``affinity_indices`` (nnz,),
  ``affinity_indptr`` (n + 1,), ``affinity_shape`` (2,);
* ``kstar_factor_`` (n, r), W with K* = W W^T (Theorem 2); ``embedding_`` (n, k), the
  spectral embedding; ``gamma_`` (n,), gamma_i of Eq. (27);
* ``objective_`` and ``kstar_change_`` (n_iter_,), per iteration; the scalars
  ``n_iter_``, ``converged_``, ``n_clusters_``, ``n_features_in_``;
* diagnostics, when the model has them: ``fit_seconds_``, ``iteration_seconds_``,
  ``eig_seconds_``, ``eig_threads_``, ``eig_drivers_``, ``kstar_rank_``,
  ``n_restarts_``, ``execution_``.

:func:`save_model` writes the file under a temporary sibling name and renames it when
complete (:func:`lswmkc_dask.io.atomic.atomic_path`); an existing file is replaced
only with ``overwrite`` and only if it is an lswmkc model file. :func:`load_model`
refuses a file of a newer format version (:class:`ModelVersionError`) and anything
that is not an lswmkc model file (:class:`ModelFileError`), naming the file.

Nothing in a file is trusted: :func:`load_model` opens only a regular file (never
waiting on a FIFO), reads only the members above (others are left unread, with a
warning), and checks each one's ``.npy`` header against the rest of the file (n
samples from ``labels_``, m kernels from ``kernel_weights_``, ``n_iter_``) before its
data is read, with the bounds of :mod:`lswmkc_dask.io.npz` (its size is what the
file holds; a compressed member expands at most 64-fold; a name found twice in the
archive is refused). Then the values and how they agree: scalars of their type and
range, arrays finite (``kstar_change_`` may start with NaN), labels in
``[0, n_clusters_)``, ``embedding_`` of ``n_clusters_`` columns, unit-norm kernel
weights, ``gamma_`` >= 0 (the scalar ``gamma`` of the parameters, where one is given),
W with each ``K*_ii`` at most sqrt(n) (what a graph with rows on the simplex bounds it
to), Z's CSR parts in full (indices in range, ``indptr`` from 0 to nnz and
non-decreasing, rows on the simplex within :data:`SIMPLEX_TOL`, zero diagonal) and the
parameters as :meth:`LSWMKC.fit` checks them (:func:`lswmkc_dask._validate.validate`,
with n and ``n_clusters_``). A damaged or made-up file is refused in bounded memory and
time with a :class:`ModelFileError` naming the file and the member.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validate import validate
from .._version import __version__
from .atomic import atomic_path
from .npz import ArrayFileError, NpzArchive, damaged, open_regular, read_csr_members
from .ownership import signature, utc_now

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MODEL_FILE",
    "ModelFileError",
    "ModelVersionError",
    "is_model_file",
    "load_model",
    "model_arrays",
    "save_model",
    "write_model",
]

#: The ``format`` member of every model file.
FORMAT = "lswmkc-model"
#: Format version written by this package; files up to it are read.
FORMAT_VERSION = 1
#: Name of the model file in a fit's output directory (``lswmkc fit --output DIR``).
MODEL_FILE = "model.npz"

#: Fitted attributes every model file holds (besides Z, written in CSR parts).
REQUIRED = ("labels_", "kernel_weights_", "kstar_factor_", "embedding_", "gamma_", "objective_", "kstar_change_",
            "n_iter_", "converged_", "n_clusters_")
#: Attributes written when the model has them (a model of a sweep may lack some).
OPTIONAL = ("n_features_in_", "kernel_names_", "fit_seconds_", "iteration_seconds_", "eig_seconds_", "eig_threads_",
            "eig_drivers_", "kstar_rank_", "n_restarts_", "execution_")
#: Attributes held as arrays of Python strings (object dtype) by a fitted model.
_TEXT_ARRAYS = ("kernel_names_", "eig_drivers_")
#: Scalars and their Python type on a loaded model.
_SCALARS = {"n_iter_": int, "converged_": bool, "n_clusters_": int, "n_features_in_": int, "fit_seconds_": float,
            "n_restarts_": int, "execution_": str}
_AFFINITY = ("affinity_data", "affinity_indices", "affinity_indptr", "affinity_shape")
#: Parameters never written (a live client; its address is no property of the model).
_NOT_SAVED = ("client",)
#: Every member of the format; others are left unread.
_KNOWN_MEMBERS = ("format", "format_version", "lswmkc_dask_version", "written_by", "created_utc", "params",
                  *REQUIRED, *OPTIONAL, *_AFFINITY)


class ModelFileError(ArrayFileError):
    """The file is not an lswmkc model file, or it is damaged or made up (a ``ValueError``;
    the message names the file and the member).
    """

    remedy = "save the model again (LSWMKC.save, or `lswmkc fit --output DIR`)"


class ModelVersionError(ModelFileError):
    """The model file was written in a newer format version than this package reads."""


def _json_value(name, value):
    """``value`` as plain JSON types; a parameter that has none is refused, by name."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _json_value(f"{name}[{k!r}]", v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(f"{name}[{i}]", v) for i, v in enumerate(value)]
    raise TypeError(
        f"parameter {name}={value!r} cannot be written to a portable model file (only numbers, text, None, lists "
        f"and dicts of them); set it to such a value (e.g. an int random_state) before saving"
    )


def _text(value):
    return np.asarray(str(value))


def model_arrays(model: Any) -> dict[str, np.ndarray]:
    """The members of ``model``'s file (see the module's table), by name.

    Parameters
    ----------
    model : LSWMKC
        Fitted.

    Returns
    -------
    dict of str -> ndarray
        No array of object dtype: text is held as NumPy unicode arrays.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        ``model`` is not fitted (it lacks one of the fitted attributes).
    TypeError
        A parameter cannot be written as JSON (a ``RandomState`` instance as
        ``random_state``, say).
    """
    from sklearn.exceptions import NotFittedError

    missing = [a for a in (*REQUIRED, "affinity_") if not hasattr(model, a)]
    if missing:
        raise NotFittedError(
            f"this {type(model).__name__} is not fitted (no {', '.join(missing)}): call fit before saving it"
        )
    params = {k: _json_value(k, v) for k, v in model.get_params(deep=False).items() if k not in _NOT_SAVED}
    arrays = {
        "format": _text(FORMAT),
        "format_version": np.asarray(FORMAT_VERSION, dtype=np.int64),
        "lswmkc_dask_version": _text(__version__),
        "written_by": _text(signature()),
        "created_utc": _text(utc_now()),
        "params": _text(json.dumps(params, sort_keys=True)),
    }
    z = sp.csr_matrix(model.affinity_)
    arrays.update(
        affinity_data=np.asarray(z.data),
        affinity_indices=np.asarray(z.indices),
        affinity_indptr=np.asarray(z.indptr),
        affinity_shape=np.asarray(z.shape, dtype=np.int64),
    )
    for name in REQUIRED + OPTIONAL:
        if not hasattr(model, name):
            continue
        value = getattr(model, name)
        if name in _TEXT_ARRAYS:
            arrays[name] = np.asarray([str(v) for v in value], dtype=str)
        elif name in _SCALARS:
            arrays[name] = _text(value) if _SCALARS[name] is str else np.asarray(_SCALARS[name](value))
        else:
            a = np.asarray(value)
            if a.dtype == object:
                raise TypeError(f"fitted attribute {name} holds Python objects and cannot be written without pickle")
            arrays[name] = a
    return arrays


def write_model(path: str | os.PathLike[str], model: Any) -> Path:
    """Write ``model``'s file to ``path`` as it is (not atomically: for a file inside a
    temporary output directory). Use :func:`save_model` for a file of its own.

    Parameters
    ----------
    path : str or Path
        The file to create (its name is kept as given: no ``.npz`` is appended).
    model : LSWMKC
        Fitted.

    Returns
    -------
    pathlib.Path
    """
    _write_arrays(path, model_arrays(model))
    return Path(path)


def _write_arrays(path, arrays):
    with open(path, "wb") as fh:  # a file object: numpy appends no ".npz" to the name
        np.savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())


def is_model_file(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a model file of this package (any format version)."""
    try:
        with NpzArchive(path) as archive:  # a regular file, read within bounds
            return "format" in archive and str(archive.read("format", "U", ())[()]) == FORMAT
    except (OSError, ValueError):  # anything unreadable is not ours
        return False


def save_model(model: Any, path: str | os.PathLike[str], overwrite: bool = False) -> Path:
    """Write ``model`` to ``path`` atomically (temporary sibling, then rename).

    Parameters
    ----------
    model : LSWMKC
        Fitted.
    path : str or Path
        The model file (``.npz`` by convention; the name is kept as given).
    overwrite : bool
        Replace an existing ``path`` that is an lswmkc model file. A file of any
        other kind, a directory or a symbolic link is never replaced.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False; or it is not an lswmkc model file
        (a ``ForeignOutputError``), whatever ``overwrite`` says.
    ProtectedOutputError
        ``path`` lies inside a kernel store (a ``ValueError``); nothing is written.
    sklearn.exceptions.NotFittedError
        ``model`` is not fitted.
    TypeError
        A parameter cannot be written as JSON.
    """
    arrays = model_arrays(model)  # before anything is created: an unfitted model leaves nothing behind
    with atomic_path(path, overwrite=overwrite, owned=is_model_file) as tmp:
        _write_arrays(tmp, arrays)
    return Path(path)


def _resolve(path):
    path = Path(path)
    if path.is_dir():
        inner = path / MODEL_FILE
        if not inner.exists():
            raise FileNotFoundError(
                f"{path} is a directory without a model file {MODEL_FILE} (a fit's output directory written by "
                "`lswmkc fit --output` holds one); give the model file or such a directory"
            )
        return inner
    if not path.exists():
        raise FileNotFoundError(f"model file not found: {path}")
    return path


def _not_a_model(path, why):
    return ModelFileError(
        f"{path} is not an lswmkc model file ({why}); model files are written by LSWMKC.save or "
        f"`lswmkc fit --output DIR` (DIR/{MODEL_FILE})"
    )


_ZIP_MAGIC = b"PK\x03\x04"
#: Text members longer than this (in bytes, 4 per character) are refused unread.
MAX_TEXT_BYTES = 4 << 20
#: Unknown members (or parameters) named in the warning that lists them; the rest are counted.
LISTED = 5
#: Rows of Z must sum to 1 within this (they lie on the simplex, Theorem 1).
SIMPLEX_TOL = 1e-6
#: The kernel weights must have unit 2-norm (Eq. 12) within this.
NORM_TOL = 1e-6


def _open_archive(path):
    """``path`` as a checked archive: a regular file, a zip archive, not a pickle."""
    with open_regular(path, ModelFileError) as fh:
        try:
            head = fh.read(6)
        except OSError as exc:
            raise _not_a_model(path, exc.strerror or str(exc)) from None
    if head[:4] != _ZIP_MAGIC:
        why = "a single NumPy array, not an archive" if head == b"\x93NUMPY" else "not a NumPy .npz archive"
        if head[:1] == b"\x80":
            why = "a pickle, which is never loaded"
        raise _not_a_model(path, why)
    return NpzArchive(path, ModelFileError)


class _Members:
    """The members of a model file, each read only when asked for, with its kind and shape checked first."""

    def __init__(self, path, archive):
        self.path, self.archive, self.values = path, archive, {}

    def __contains__(self, name):
        return name in self.archive

    def fail(self, name, why):
        return ModelFileError(f"{self.path}: member {name!r} {why}; {damaged(ModelFileError)}")

    def get(self, name, kinds, shape=(), check=None):
        """Member ``name`` (``kinds``, ``shape`` as :meth:`NpzArchive.header`); ``check(value)`` returns why
        it is refused, or None.
        """
        value = self.archive.read(name, kinds, shape, MAX_TEXT_BYTES if "U" in kinds else None)
        why = check(value) if check is not None else None
        if why:
            raise self.fail(name, why)
        return value

    def scalar(self, name, kinds, low=None, high=None):
        value = self.get(name, kinds)[()].item()
        if low is not None and not low <= value <= high:
            raise self.fail(name, f"is {value!r}, outside [{low}, {high}]")
        return value


def _finite(a):
    bad = np.flatnonzero(~np.isfinite(a.ravel()))
    return f"has {bad.size} value{'s' if bad.size > 1 else ''} that are not finite (NaN or infinite)" if bad.size \
        else None


def _within(low, high):
    def check(a):
        if a.size and (int(a.min()) < low or int(a.max()) > high):
            return f"has values outside [{low}, {high}] (from {int(a.min())} to {int(a.max())})"
        return None
    return check


def _check_format(path, members):
    """The format, the version and the parameters' JSON text, before anything else is read."""
    if "format" not in members:
        raise _not_a_model(path, "an .npz archive without a 'format' member")
    fmt = str(members.get("format", "U")[()])
    if fmt != FORMAT:
        raise _not_a_model(path, f"its format is {fmt!r}, not {FORMAT!r}")
    if "format_version" not in members:
        raise _not_a_model(path, "no format_version member")
    version = int(members.get("format_version", "i")[()])
    written = str(members.get("lswmkc_dask_version", "U")[()]) if "lswmkc_dask_version" in members else "?"
    if version > FORMAT_VERSION:
        raise ModelVersionError(
            f"{path} is an lswmkc model file of format version {version} (written by lswmkc-dask {written}); "
            f"this lswmkc-dask {__version__} reads format versions up to {FORMAT_VERSION}: upgrade "
            "lswmkc-dask to load it"
        )
    if version < 1:
        raise members.fail("format_version", f"is {version}; format versions start at 1")
    missing = [k for k in ("params", *REQUIRED, *_AFFINITY) if k not in members]
    if missing:
        raise ModelFileError(f"{path} is an incomplete lswmkc model file: no {', '.join(missing)}")
    try:
        params = json.loads(str(members.get("params", "U")[()]))
    except (ValueError, RecursionError) as exc:
        why = "is nested too deeply" if isinstance(exc, RecursionError) else f"is not readable JSON ({exc})"
        raise members.fail("params", why) from None
    if not isinstance(params, dict):
        raise members.fail("params", f"is not a JSON object but {type(params).__name__}")
    return params


def _kstar_change(a):
    return _finite(a[1:]) or (None if a.size == 0 or np.isnan(a[0]) or np.isfinite(a[0]) else _finite(a[:1]))


def _unit_norm(a):
    norm = float(np.linalg.norm(a))
    return _finite(a) or (None if abs(norm - 1.0) <= NORM_TOL else f"has 2-norm {norm:.12g}, not 1 (Eq. 12)")


def _kstar_bound(n):
    """Why a factor W is refused: each K*_ii = ||W[i, :]||^2 is at most the largest eigenvalue of
    S = (Z + Z^T)/2, at most ||Z||_2 <= sqrt(||Z||_1 ||Z||_inf) <= sqrt(n) for rows on the simplex.
    """
    bound = math.sqrt(n) * (1 + NORM_TOL)

    def check(w):
        why = _finite(w)
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
    return _finite(a) or (f"has {low.size} negative value{'s' if low.size > 1 else ''} (sample {int(low[0])}: "
                          f"{float(a[low[0]]):g}); gamma_i of Eq. (27) is >= 0" if low.size else None)


def _read_attributes(members):
    """The fitted attributes, every one checked against n (samples), m (kernels), k (``n_clusters_``) and
    ``n_iter_``.
    """
    labels = members.get("labels_", "i", (None,))
    n = labels.shape[0]
    if n < 1:
        raise members.fail("labels_", "is empty (no samples)")
    out = {"labels_": labels}
    out["n_iter_"] = int(members.scalar("n_iter_", "i", 0, 2**31 - 1))
    k = out["n_clusters_"] = int(members.scalar("n_clusters_", "i", 2, n - 1))  # as fit accepts it
    why = _within(0, k - 1)(labels)
    if why:
        raise members.fail("labels_", f"{why}, but n_clusters_ is {k}: labels number the clusters from 0 to {k - 1}")
    out["converged_"] = bool(members.scalar("converged_", "b"))
    weights = out["kernel_weights_"] = members.get("kernel_weights_", "f", (None,), _unit_norm)
    m, t = weights.shape[0], out["n_iter_"]
    out["affinity_"] = read_csr_members(members.archive, "affinity_", n, simplex=SIMPLEX_TOL)
    out["kstar_factor_"] = members.get("kstar_factor_", "f", (n, None), _kstar_bound(n))
    embedding = out["embedding_"] = members.get("embedding_", "f", (n, None), _finite)
    if embedding.shape[1] != k:
        raise members.fail("embedding_", f"has {embedding.shape[1]} columns, but n_clusters_ is {k} (the spectral "
                                         "embedding has one column per cluster)")
    out["gamma_"] = members.get("gamma_", "f", (n,), _non_negative)
    out["objective_"] = members.get("objective_", "f", (t,), _finite)
    out["kstar_change_"] = members.get("kstar_change_", "f", (t,), _kstar_change)
    optional = {"kernel_names_": ("U", (m,)), "eig_drivers_": ("U", (None,)), "iteration_seconds_": ("f", (None,)),
                "eig_seconds_": ("f", (None,)), "eig_threads_": ("i", (None,)), "kstar_rank_": ("i", (None,)),
                "n_features_in_": ("i", ()), "fit_seconds_": ("f", ()), "n_restarts_": ("i", ()),
                "execution_": ("U", ())}
    for name, (kinds, shape) in optional.items():
        if name in members:
            value = members.get(name, kinds, shape)
            if name in _TEXT_ARRAYS:
                value = np.asarray([str(v) for v in value], dtype=object)
            elif name in _SCALARS:
                value = _SCALARS[name](value[()])
            out[name] = value
    if out.get("n_features_in_", n) != n:
        raise members.fail("n_features_in_", f"is {out['n_features_in_']}, but labels_ has n = {n} samples")
    return out


def _check_params(members, model, attributes):
    """The parameters as :meth:`LSWMKC.fit` checks them (:func:`lswmkc_dask._validate.validate`, on entry and
    against n), and against the fitted attributes (``n_clusters_``; ``gamma_`` for a scalar gamma).
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

    No pickle is involved, and nothing in the file is trusted: only the members of the
    format are read (:mod:`lswmkc_dask.io.npz`), each one's dtype, dimensions and
    shape checked against the others (n samples, m kernels, ``n_iter_`` iterations)
    before its data is read, so that a damaged or hostile file is refused in bounded
    memory and time; then its values and how they agree (finite, labels in
    ``[0, n_clusters_)``, ``embedding_`` of ``n_clusters_`` columns, K* = W W^T
    bounded, ``gamma_`` >= 0, Z a CSR matrix with every index in range and rows on the
    simplex, unit-norm kernel weights, the parameters :meth:`LSWMKC.fit` accepts for
    this n). The loaded model has the parameters
    it was fitted with (``client=None``) and its fitted attributes (``labels_``,
    ``kernel_weights_``, ``kernel_names_``, ``affinity_`` as CSR, ``kstar_factor_`` and
    so ``neighborhood_kernel_``, ``embedding_``, ...), so that :meth:`LSWMKC.evaluate`
    runs under both protocols.

    Parameters
    ----------
    path : str or Path
        A model file, or a fit's output directory holding ``model.npz``.
    cls : type
        The estimator class to build (:class:`lswmkc_dask.LSWMKC`; :meth:`LSWMKC.load`
        passes itself, so this module need not import the estimator).

    Returns
    -------
    LSWMKC

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist, or is a directory without ``model.npz``.
    ModelVersionError
        The file's format version is newer than :data:`FORMAT_VERSION` (a
        ``ValueError``; the message names the file, its version and the supported one).
    ModelFileError
        ``path`` is not an lswmkc model file (a pickle, another ``.npz``, a FIFO or
        any other file), or it is damaged or made up (a member missing, unreadable,
        found twice, of the wrong dtype or shape, too large for what it declares, not
        finite, out of range, at odds with another member or with what ``fit``
        accepts); a ``ValueError``. The message names the file and the member.

    Warns
    -----
    UserWarning
        The file holds parameters or members this version does not know (they are
        left out, unread; the warning names the first :data:`LISTED` and counts the
        rest).
    """
    path = _resolve(path)
    with _open_archive(path) as archive:
        members = _Members(path, archive)
        params = _check_format(path, members)
        attributes = _read_attributes(members)
        unknown = sorted(set(archive.names) - set(_KNOWN_MEMBERS)) + sorted(archive.others)
    if unknown:
        warnings.warn(f"{path} holds members this lswmkc-dask does not know, left out unread: {_listed(unknown)}",
                      UserWarning, stacklevel=3)
    known = set(cls().get_params(deep=False)) - set(_NOT_SAVED)  # a client is never taken from a file
    unknown = sorted(set(params) - known)
    if unknown:
        warnings.warn(f"{path} holds parameters this lswmkc-dask does not know, left out: {_listed(unknown)}",
                      UserWarning, stacklevel=3)
    model = cls(**{k: v for k, v in params.items() if k in known})
    _check_params(members, model, attributes)
    for name, value in attributes.items():
        setattr(model, name, value)
    return model
