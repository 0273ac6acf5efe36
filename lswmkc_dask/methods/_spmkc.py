"""SPMKC: simultaneous global and local graph structure preserving multiple kernel clustering.

Ren, Z., Sun, Q., "Simultaneous Global and Local Graph Structure Preserving for Multiple Kernel
Clustering", IEEE Transactions on Neural Networks and Learning Systems 32(5), 1839-1851, 2021
(online 2020): a consensus kernel learnt from the base kernels by an affine weighting, and one
affinity graph that preserves the global structure (kernel self-expressiveness) and the local
structure (adaptive neighbours in the consensus kernel's feature space), clustered spectrally.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy.linalg import eigh

from ..core.equations import combine_kernels
from ._base import MultipleKernelClustering, Solution
from ._cagl import self_expressive_graph, self_expressive_objective
from ._swmc import laplacian, self_weights


def consensus_kernel(kernels: np.ndarray, w: np.ndarray, z: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    """K = argmin over K >= 0 (PSD) of tr(K C) + gamma sum_p w_p ||K - K_p||_F^2, C from the graph Z.

    C = (I - Z)^T (I - Z) + 2 alpha L_Z collects the terms linear in K: the self-expressiveness
    tr(K - 2 Z K + Z K Z^T) = tr(K (I - Z)^T (I - Z)) and the local term
    sum_ij (K_ii + K_jj - 2 K_ij) z_ij = 2 tr(K L_Z), L_Z the Laplacian of (Z + Z^T)/2; the
    minimiser is the projection of sum_p w_p K_p / sum_p w_p - C / (2 gamma sum_p w_p) onto the PSD cone.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
    w : ndarray of shape (m,)
        Positive weights.
    z : ndarray of shape (n, n)
    alpha, gamma : float
        gamma > 0.

    Returns
    -------
    ndarray of shape (n, n)
        Symmetric positive semi-definite.
    """
    r = np.eye(z.shape[0]) - z
    total = float(np.sum(w))
    target = combine_kernels(kernels, w) / total - (r.T @ r + 2.0 * alpha * laplacian(z)) / (2.0 * gamma * total)
    lam, vec = eigh((target + target.T) / 2.0)
    keep = lam > 0
    out = (vec[:, keep] * lam[keep]) @ vec[:, keep].T
    return (out + out.T) / 2.0


def spectral_affinity_embedding(z: np.ndarray, n_clusters: int) -> np.ndarray:
    """The normalised spectral embedding (Ng, Jordan, Weiss, NIPS 2001) of the affinity of a graph Z.

    W = |Z| with each column divided by its largest entry, plus its transpose (the affinity of
    Elhamifar and Vidal's SSC code, shipped in SPMKC's demo repository); the embedding is the
    top-c eigenvectors of D^-1/2 W D^-1/2 (rows are scaled to unit length by the caller).

    Parameters
    ----------
    z : ndarray of shape (n, n)
    n_clusters : int

    Returns
    -------
    ndarray of shape (n, c)
    """
    a = np.abs(z)
    a = a / (a.max(axis=0, keepdims=True) + np.finfo(float).eps)
    w = a + a.T
    d = 1.0 / np.sqrt(w.sum(axis=1) + np.finfo(float).eps)
    n, c = w.shape[0], int(n_clusters)
    _, vec = eigh(d[:, None] * w * d[None, :], subset_by_index=(n - c, n - 1))
    return vec


class SPMKC(MultipleKernelClustering):
    """Structure-preserving multiple kernel clustering (SPMKC).

    Minimises over the consensus kernel K (PSD) and the graph Z (rows on the simplex, zero diagonal)

        tr(K - 2 Z K + Z K Z^T) + alpha sum_ij ||phi(x_i) - phi(x_j)||^2 z_ij + beta ||Z||_F^2
        + gamma sum_p ||K - K_p||_F

    (global structure: kernel self-expressiveness; local structure: adaptive neighbours in K's
    feature space, ||phi(x_i) - phi(x_j)||^2 = K_ii + K_jj - 2 K_ij; the consensus kernel in the
    neighbourhood of every base kernel, with self-tuned weights w_p = 1 / (2 ||K - K_p||_F) that
    make K an affine combination of the base kernels, :func:`~._swmc.self_weights`), by block steps: Z by
    :func:`~._cagl.self_expressive_graph` (exact), K by :func:`consensus_kernel` (exact for the
    weighted term), then w; the labels are the k-means of the normalised spectral embedding
    of Z (:func:`spectral_affinity_embedding`).

    Parameters
    ----------
    n_clusters : int
        c.
    alpha : float
        Weight of the local-structure term (>= 0).
    beta : float
        Weight of ||Z||_F^2 (> 0).
    gamma : float
        Weight of the consensus-kernel term (> 0).
    max_iter : int
    tol : float
        Stop when the objective's relative change is below ``tol``.
    preprocess : bool
    n_init : int
        k-means starts on the embedding.
    random_state : int, RandomState or None
        Seeds the k-means only (the method is deterministic).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
    kernel_weights_ : ndarray of shape (n_kernels,)
        The weights w_p = 1 / (2 ||K - K_p||_F) of the last iteration (not normalised; K's affine
        combination uses w / sum(w)).
    objective_ : list of float
        The objective above after each iteration (non-increasing).
    extra_ : dict
        ``graph`` (Z), ``kernel`` (K), ``weights_history`` ((n_iter, m)).

    Raises
    ------
    ParameterError
        From ``fit`` (a ``ValueError``): alpha negative, beta or gamma not positive,
        ``n_clusters`` outside 1..n or ``max_iter`` below 1.

    Notes
    -----
    The authors' public repository, github.com/renzhenwen/demo_SPMKC (commit
    6e059b9087f3f76222cff775d74e60babcaa9f82), ships SPMKC only as an encrypted MATLAB P-file,
    which cannot be read, and a demo calling it on YALE with four parameters (4, 1, 200, 1); the
    demo's helper files (the SSC affinity and spectral clustering, a simplex projection) fix the
    final clustering used here. Without their code the four demo values could not be mapped to the
    terms above, and the model is written from the paper's description (affine kernel weights,
    kernel group self-expressiveness, kernel adaptive local structure); its exact equations and
    hyper-parameter grid could not be checked against the paper's text, so this is not a verified
    re-implementation (a plain affine least-squares fit of K by sum_p w_p K_p, tried first, gives
    weights of +-100 on YALE, whose kernels are nearly collinear; the self-tuned weights above
    do not; with gamma large, e.g. 200, K settles on one base kernel, sum_p ||K - K_p||_F being
    minimised at a median of the kernels). Start: K = sum_p K_p / m. tests/test_methods_graph.py
    checks each block step against scipy.optimize, the constraints, the non-increasing objective,
    perfect labels on separated synthetic kernels and an accuracy floor on YALE.
    """

    name: ClassVar[str] = "spmkc"
    param_grid: ClassVar[dict[str, tuple]] = {"alpha": (0.01, 0.1, 1.0), "beta": (1.0, 10.0), "gamma": (0.1, 1.0, 10.0)}
    positive_params: ClassVar[tuple[str, ...]] = ("beta", "gamma")
    non_negative_params: ClassVar[tuple[str, ...]] = ("alpha",)

    def __init__(self, n_clusters: int = 2, *, alpha: float = 0.1, beta: float = 1.0, gamma: float = 1.0,
                 max_iter: int = 50, tol: float = 1e-6, preprocess: bool = True, n_init: int = 50,
                 random_state: Any = None) -> None:
        self.n_clusters = n_clusters
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state

    def objective(self, kernels: np.ndarray, k: np.ndarray, z: np.ndarray) -> float:
        """The SPMKC objective (class docstring) at (K, Z).

        Parameters
        ----------
        kernels : ndarray of shape (m, n, n)
        k, z : ndarray of shape (n, n)

        Returns
        -------
        float
        """
        near = float(np.sqrt(((kernels - k[None]) ** 2).sum(axis=(1, 2))).sum())
        return self_expressive_objective(k, z, self.alpha, self.beta) + self.gamma * near

    def _solve(self, kernels: np.ndarray) -> Solution:
        k = kernels.mean(axis=0)
        w = self_weights(kernels, k)
        z = None
        objective: list[float] = []
        history = []
        converged = False
        for _ in range(int(self.max_iter)):
            z = self_expressive_graph(k, self.alpha, self.beta, z0=z)
            k = consensus_kernel(kernels, w, z, self.alpha, self.gamma)
            w = self_weights(kernels, k)
            history.append(w.copy())
            objective.append(self.objective(kernels, k, z))
            if len(objective) > 1 and abs(objective[-2] - objective[-1]) <= self.tol * abs(objective[-1]):
                converged = True
                break
        assert z is not None
        return Solution(kernel_weights=w, objective=objective, n_iter=len(objective), converged=converged,
                        embedding=spectral_affinity_embedding(z, int(self.n_clusters)),
                        extra={"graph": z, "kernel": k, "weights_history": np.array(history)})
