"""Ground-truth labels: validation against the number of samples, and label files."""

from __future__ import annotations

import numpy as np

from ..errors import KernelInputError

__all__ = ["check_labels", "read_labels"]


def check_labels(labels, n_samples, where="labels"):
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
        If the labels have another length than the kernels.
    """
    if labels is None:
        return None
    y = np.asarray(labels).ravel()
    if y.shape[0] != n_samples:
        raise KernelInputError(f"{where} have length {y.shape[0]} but the kernels have {n_samples} samples")
    if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        y = y.astype(np.int64)
    return y


def read_labels(path):
    """Labels from a text file: one per line, or a CSV whose last column is the label.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    ndarray of shape (n,)
        Floats where every value is numeric, else strings.

    Raises
    ------
    FileNotFoundError, PermissionError
    """
    from .readers import readable_file

    path = readable_file(path)
    rows = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    if rows and not rows[0].replace(",", "").replace("-", "").replace(".", "").replace(" ", "").isdigit():
        rows = rows[1:]
    vals = [r.split(",")[-1].strip() for r in rows]
    try:
        return np.asarray([float(v) for v in vals])
    except ValueError:
        return np.asarray(vals)
