"""Real multiple-kernel data sets shipped with the package.

* YALE: 165 face images of 15 people, 5 base kernels, from the LSWMKC authors'
  repository (github.com/liliangnudt/LSWMKC), as used in the paper's experiments.
* Handwritten: the UCI Multiple Features data set (2000 digits 0-9, 6 views),
  Duin, R. (1998), UCI Machine Learning Repository, https://doi.org/10.24432/C5HC70,
  licensed CC BY 4.0.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np

from ..io import load_kernels
from ..kernels.features import FeatureKernels

__all__ = ["DATASETS", "HANDWRITTEN_VIEWS", "load_yale", "load_handwritten", "load_dataset"]

HANDWRITTEN_VIEWS = ("fou", "fac", "kar", "pix", "zer", "mor")
DATASETS = ("yale", "handwritten")


def _data_file(name):
    return resources.files(__name__).joinpath("data", name)


def load_yale() -> tuple[np.ndarray, np.ndarray]:
    """The YALE base kernels of the LSWMKC paper.

    ``YALE_Kmatrix.mat`` of the authors' code (github.com/liliangnudt/LSWMKC): 165
    grey-scale face images of 15 subjects (YALE face database), for research use.

    Returns
    -------
    kernels : ndarray of shape (5, 165, 165), float64
        Raw base kernels (not yet centred or normalised).
    labels : ndarray of shape (165,), int
        Subjects 1..15.
    """
    with resources.as_file(_data_file("YALE_Kmatrix.mat")) as path:
        kernels, labels = load_kernels(path)
    assert labels is not None  # (the file has them)
    return kernels, labels


def load_handwritten(views: Sequence[str] = HANDWRITTEN_VIEWS) -> tuple[list[np.ndarray], np.ndarray]:
    """The UCI Multiple Features (Handwritten) data set: 2000 digits in 6 views.

    Views (features): ``fou`` Fourier coefficients (76), ``fac`` profile
    correlations (216), ``kar`` Karhunen-Loeve coefficients (64), ``pix`` pixel
    averages (240), ``zer`` Zernike moments (47), ``mor`` morphological features (6).

    Parameters
    ----------
    views : sequence of str
        Which views, in order.

    Returns
    -------
    features : list of ndarray, each of shape (2000, d_v)
    labels : ndarray of shape (2000,), int
        Digits 0..9 (200 each).

    Raises
    ------
    ValueError
        For an unknown view name.
    """
    out: list[np.ndarray] = []
    labels = np.zeros(0, dtype=np.int64)
    for v in views:
        if v not in HANDWRITTEN_VIEWS:
            raise ValueError(f"unknown view {v!r}; choose from {HANDWRITTEN_VIEWS}")
        with _data_file(f"mfeat-{v}.csv.gz").open("rb") as raw, gzip.open(raw, "rt") as fh:
            a = np.loadtxt(fh, delimiter=",", skiprows=1)
        out.append(a[:, :-1])
        labels = a[:, -1].astype(np.int64)
    return out, labels


def load_dataset(name: str) -> tuple[Any, np.ndarray]:
    """Base kernels (or a kernel source) and labels of a shipped data set.

    Parameters
    ----------
    name : {"yale", "handwritten"}

    Returns
    -------
    kernels : ndarray of shape (m, n, n) or FeatureKernels
        YALE: the raw kernels; Handwritten: Gaussian kernels of the z-scored views
        (bandwidth = mean squared pairwise distance), computed block by block.
    labels : ndarray of shape (n,)

    Raises
    ------
    ValueError
        For an unknown name.

    See Also
    --------
    load_yale, load_handwritten

    Examples
    --------
    >>> from lswmkc_dask.datasets import load_dataset
    >>> kernels, labels = load_dataset("yale")
    >>> kernels.shape, labels.shape
    ((5, 165, 165), (165,))
    >>> views, digits = load_dataset("handwritten")  # Gaussian kernels of 6 views, built when read
    >>> views.names
    ['mfeat-fou', 'mfeat-fac', 'mfeat-kar', 'mfeat-pix', 'mfeat-zer', 'mfeat-mor']
    """
    if name == "yale":
        return load_yale()
    if name == "handwritten":
        views, labels = load_handwritten()
        return FeatureKernels(views, "gaussian", names=[f"mfeat-{v}" for v in HANDWRITTEN_VIEWS]), labels
    raise ValueError(f"unknown dataset {name!r}; choose from {DATASETS}")
