"""A YALE kernel stack with an extra, near-constant ("degenerate") 6th base kernel.

Used with ``tests/data/degenerate_octave_reference.json``: the outputs of the authors'
MATLAB code (github liliangnudt/LSWMKC, run under GNU Octave) on exactly these floats.

The 6th kernel is a Gaussian (RBF) kernel of seeded random integer features with a
huge bandwidth, ``K6 = exp(-D2 / (1e10 * mean(D2)))``: every entry lies within about
1e-9 of 1. It is PSD, so after centring its diagonal is tiny but positive (about
1e-10 of the raw scale), and after normalisation it is a legitimate unit-diagonal kernel
(close to the cosine similarity of the centred features), carrying ~1e-6 relative
round-off from the centring.

Bit-exact regeneration on any platform: the features are small integers, so ``D2`` is
computed exactly in integer arithmetic; ``t = D2 / (1e10 * mean(D2))`` uses only
correctly rounded IEEE operations; and ``exp(-t)`` is evaluated as ``1.0 - t``. For
``t < 1e-9`` the dropped term ``t**2 / 2 < 1e-18`` is far below half an ulp of 1
(1.1e-16), so ``1.0 - t`` is the correctly rounded ``exp(-t)`` (it equals
``numpy.exp(-t)`` on every entry here) without depending on a libm's ``exp``.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

YALE_FILE = Path(__file__).resolve().parents[1] / "lswmkc_dask" / "datasets" / "data" / "YALE_Kmatrix.mat"

SEED = 20240611
N_FEATURES = 20
FEATURE_MAX = 100
BANDWIDTH_FACTOR = 1e10


def _yale():
    """YALE's raw kernels (5, 165, 165) in (m, n, n) order, and labels 1..15."""
    with h5py.File(YALE_FILE, "r") as f:
        kh = np.asarray(f["KH"], dtype=np.float64)  # h5[p, j, i] = K_p[i, j]
        y = np.asarray(f["Y"], dtype=np.float64).ravel()
    return np.ascontiguousarray(np.swapaxes(kh, 1, 2)), y.astype(np.int64)


def degenerate_kernel(n, seed=SEED, n_features=N_FEATURES, bandwidth_factor=BANDWIDTH_FACTOR):
    """The near-constant kernel ``exp(-D2 / (bandwidth_factor * mean(D2)))``, (n, n).

    Exactly symmetric, entries in (1 - ~1e-9, 1], diagonal exactly 1.
    """
    rng = np.random.default_rng(seed)
    x = rng.integers(0, FEATURE_MAX + 1, size=(n, n_features), dtype=np.int64)
    diff = x[:, None, :] - x[None, :, :]
    d2 = np.einsum("ijk,ijk->ij", diff, diff)  # exact int64, symmetric
    mean_d2 = float(int(d2.sum())) / float(n * n)
    t = d2.astype(np.float64) / (bandwidth_factor * mean_d2)
    return 1.0 - t  # == exp(-t) correctly rounded (see module docstring)


def degenerate_yale(seed=SEED):
    """YALE's 5 base kernels plus a near-constant 6th one.

    Returns
    -------
    kernels : ndarray of shape (6, 165, 165), float64
        Raw kernels in (m, n, n) order; the 6th is :func:`degenerate_kernel`.
    labels : ndarray of shape (165,), int64
        Subjects 1..15.
    """
    k5, labels = _yale()
    k6 = degenerate_kernel(k5.shape[1], seed=seed)
    return np.concatenate([k5, k6[None]], axis=0), labels
