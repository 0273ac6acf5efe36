"""A run's arrays in its model file (:mod:`lswmkc_dask.io.model_file`), read through its member checks.

A fit's or sweep run's directory keeps ``report.json``, its label CSVs and one
``model.safetensors``: Z, W, the snapshots and the per-sample silhouettes are read from
it by :func:`run_arrays`, :func:`read_snapshots` and :func:`read_silhouettes`, each member
checked as :func:`~lswmkc_dask.io.model_file.load_model` checks it (every refusal a
:class:`~lswmkc_dask.errors.ModelFileError` naming the file and the member).
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from .model_file import (
    SILHOUETTES,
    SNAPSHOT_MEMBER,
    add_members,
    affinity_member,
    csr_member,
    kstar_bound,
    open_members,
)
from .npz import nonfinite


def _open(path, n=None):
    """The members of the run's model file (:func:`open_members`) and its samples (``n`` when given)."""
    members = open_members(path)
    n_file = members.get("labels_", "i", (None,)).shape[0]
    if n is not None and n_file != n:
        raise members.fail("labels_", f"holds {n_file} samples, but the run's labels are {n}")
    return members, n_file


def run_arrays(path: str | os.PathLike[str], n: int | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """Z and W (K* = W W^T, Theorem 2) of a run, each member checked as :func:`load_model` checks it.

    Parameters
    ----------
    path : str or Path
        A model file, or a fit's or sweep run's directory holding ``model.safetensors``.
    n : int, optional
        The samples expected (those of the run's labels).

    Returns
    -------
    Z : scipy.sparse.csr_matrix of shape (n, n)
        Rows on the simplex (Theorem 1), zero diagonal.
    W : ndarray of shape (n, r)

    Raises
    ------
    FileNotFoundError
        No model file there.
    ModelFileError
        Not a model file, damaged, or of other than ``n`` samples (a ``ValueError``
        naming the file and the member).
    """
    members, n = _open(path, n)
    return affinity_member(members, n), members.get("kstar_factor_", "f", (n, None), kstar_bound(n))


def read_snapshots(path: str | os.PathLike[str], n: int | None = None) -> dict[int, tuple]:
    """The snapshots a run kept (``snapshot_iterations``): ``{t: (Z_t, W_t or None, omega_t)}``.

    Z_t (n, n) CSR checked in full, W_t (n, r) (none at t = 0) and omega_t (m,) finite.

    Parameters
    ----------
    path : str or Path
        A model file or a run directory holding one.
    n : int, optional
        The samples expected.

    Returns
    -------
    dict of int to tuple
        Empty when the run kept none.

    Raises
    ------
    FileNotFoundError, ModelFileError
        As :func:`run_arrays`.
    """
    members, n = _open(path, n)
    m = members.get("kernel_weights_", "f", (None,)).shape[0]
    out = {}
    for t in sorted({int(x[1]) for x in map(SNAPSHOT_MEMBER.fullmatch, members.names()) if x}):
        factor = f"snapshot{t}_factor"
        out[t] = (csr_member(members, f"snapshot{t}_", n),
                  members.get(factor, "f", (n, None), nonfinite) if factor in members else None,
                  members.get(f"snapshot{t}_weights", "f", (m,), nonfinite))
    return out


def read_silhouettes(path: str | os.PathLike[str]) -> np.ndarray | None:
    """A sweep run's per-sample silhouettes (:data:`SILHOUETTES`), or None before it is scored.

    Returns
    -------
    ndarray of shape (number of k, n) or None

    Raises
    ------
    FileNotFoundError, ModelFileError
        As :func:`run_arrays`.
    """
    members, n = _open(path)
    return members.get(SILHOUETTES, "f", (None, n)) if SILHOUETTES in members else None


def add_silhouettes(path: str | os.PathLike[str], samples: np.ndarray) -> None:
    """Write ``samples`` (number of k, n) as the :data:`SILHOUETTES` of the model file ``path`` (a run's
    directory holding one), replacing the file atomically.

    Raises
    ------
    FileNotFoundError, ModelFileError
        As :func:`run_arrays`.
    """
    add_members(path, {SILHOUETTES: np.asarray(samples, dtype=np.float64)})
