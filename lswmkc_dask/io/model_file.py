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
"""

from __future__ import annotations

import json
import numbers
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._version import __version__
from .atomic import _utc_now, atomic_path, signature

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


class ModelFileError(ValueError):
    """The file is not an lswmkc model file, or it is damaged (the message names it)."""


class ModelVersionError(ModelFileError):
    """The model file was written in a newer format version than this package reads."""


def _package_version():
    return __version__


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
        "lswmkc_dask_version": _text(_package_version()),
        "written_by": _text(signature()),
        "created_utc": _text(_utc_now()),
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
        with np.load(path, allow_pickle=False) as data:
            return "format" in data.files and str(data["format"][()]) == FORMAT
    except Exception:  # noqa: BLE001 - anything unreadable is not ours
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
        if not inner.is_file():
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


def _read_members(path):
    """The members of the model file at ``path``, checked for format and version."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(6)
    except OSError as exc:
        raise _not_a_model(path, exc.strerror or str(exc)) from None
    if head[:4] != _ZIP_MAGIC:
        why = "a single NumPy array, not an archive" if head == b"\x93NUMPY" else "not a NumPy .npz archive"
        if head[:1] == b"\x80":
            why = "a pickle, which is never loaded"
        raise _not_a_model(path, why)
    try:
        archive = np.load(path, allow_pickle=False)
    except ValueError as exc:  # a pickle: refused unread
        raise _not_a_model(path, "it holds pickled data, which is never loaded" if "pickle" in str(exc)
                           else " ".join(str(exc).split())) from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise _not_a_model(path, " ".join(str(exc).split()) or type(exc).__name__) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise _not_a_model(path, "it is a single NumPy array, not an archive")
    with archive:
        if "format" not in archive.files:
            raise _not_a_model(path, "an .npz archive without a 'format' member")
        try:
            fmt = str(archive["format"][()])
            version = int(archive["format_version"][()]) if "format_version" in archive.files else None
            written = str(archive["lswmkc_dask_version"][()]) if "lswmkc_dask_version" in archive.files else "?"
        except (ValueError, TypeError, KeyError) as exc:
            raise _not_a_model(path, f"unreadable format members: {exc}") from None
        if fmt != FORMAT:
            raise _not_a_model(path, f"its format is {fmt!r}, not {FORMAT!r}")
        if version is None:
            raise _not_a_model(path, "no format_version member")
        if version > FORMAT_VERSION:
            raise ModelVersionError(
                f"{path} is an lswmkc model file of format version {version} (written by lswmkc-dask {written}); "
                f"this lswmkc-dask {_package_version()} reads format versions up to {FORMAT_VERSION}: upgrade "
                "lswmkc-dask to load it"
            )
        members = {}
        for name in archive.files:
            try:
                members[name] = archive[name]
            except (ValueError, OSError, zipfile.BadZipFile) as exc:
                raise ModelFileError(f"{path}: member {name!r} cannot be read ({' '.join(str(exc).split())}); "
                                     "the file is damaged") from None
    return members


def load_model(path: str | os.PathLike[str], cls: type) -> Any:
    """Read a model written by :func:`save_model` (or ``lswmkc fit --output DIR``).

    No pickle is involved: the file is read with ``numpy.load(allow_pickle=False)``.
    The loaded model has the parameters it was fitted with (``client=None``) and its
    fitted attributes (``labels_``, ``kernel_weights_``, ``kernel_names_``,
    ``affinity_`` as CSR, ``kstar_factor_`` and so ``neighborhood_kernel_``,
    ``embedding_``, ...), so that :meth:`LSWMKC.evaluate` runs under both protocols.

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
        ``path`` is not an lswmkc model file (a pickle, another ``.npz``, any other
        file), or it is damaged (a member missing or unreadable, shapes that disagree);
        a ``ValueError``.

    Warns
    -----
    UserWarning
        The file holds parameters this version does not know (they are left out).
    """
    path = _resolve(path)
    members = _read_members(path)
    missing = [k for k in ("params", *REQUIRED, *_AFFINITY) if k not in members]
    if missing:
        raise ModelFileError(f"{path} is an incomplete lswmkc model file: no {', '.join(missing)}")
    try:
        params = json.loads(str(members["params"][()]))
    except ValueError as exc:
        raise ModelFileError(f"{path}: its parameters are not readable JSON ({exc})") from None
    if not isinstance(params, dict):
        raise ModelFileError(f"{path}: its parameters are not a JSON object but {type(params).__name__}")
    known = set(cls().get_params(deep=False)) - set(_NOT_SAVED)  # a client is never taken from a file
    unknown = sorted(set(params) - known)
    if unknown:
        warnings.warn(f"{path} holds parameters this lswmkc-dask does not know, left out: {', '.join(unknown)}",
                      UserWarning, stacklevel=3)
    model = cls(**{k: v for k, v in params.items() if k in known})
    try:
        shape = tuple(int(x) for x in members["affinity_shape"])
        model.affinity_ = sp.csr_matrix(
            (members["affinity_data"], members["affinity_indices"], members["affinity_indptr"]), shape=shape
        )
    except (ValueError, TypeError) as exc:
        raise ModelFileError(f"{path}: the affinity Z cannot be rebuilt ({exc}); the file is damaged") from None
    for name in REQUIRED + OPTIONAL:
        if name not in members:
            continue
        value = members[name]
        if name in _TEXT_ARRAYS:
            value = np.asarray([str(v) for v in value], dtype=object)
        elif name in _SCALARS:
            value = _SCALARS[name](value[()])
        setattr(model, name, value)
    _check_shapes(path, model)
    return model


def _check_shapes(path, model):
    n = model.labels_.shape[0]
    checks = [
        ("affinity_", model.affinity_.shape, (n, n)),
        ("kstar_factor_ rows", model.kstar_factor_.shape[:1], (n,)),
        ("embedding_ rows", model.embedding_.shape[:1], (n,)),
        ("gamma_", model.gamma_.shape, (n,)),
        ("objective_", model.objective_.shape, (model.n_iter_,)),
        ("kstar_change_", model.kstar_change_.shape, (model.n_iter_,)),
    ]
    if hasattr(model, "kernel_names_"):
        checks.append(("kernel_names_", model.kernel_names_.shape, model.kernel_weights_.shape))
    bad = [f"{name} {got} (expected {want})" for name, got, want in checks if tuple(got) != tuple(want)]
    if model.labels_.ndim != 1 or bad:
        raise ModelFileError(f"{path}: the arrays disagree with {n} samples and {model.n_iter_} iterations: "
                             f"{'; '.join(bad) or 'labels_ is not one-dimensional'}; the file is damaged")
