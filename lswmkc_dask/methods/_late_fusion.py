"""Late-fusion multi-view clustering on base partitions: LF-MVC and OPLFMVC.

Both methods start from one *base partition* per kernel, H_p (n x k, the top-k eigenvectors
of K_p, i.e. the relaxed kernel k-means solution of view p), and fuse them through k x k
orthogonal rotations W_p and view weights beta_p with ||beta||_2 = 1:

* **LF-MVC** (Wang, Liu, Zhu, Tang, Liu, Hu, Xia, Yin, "Multi-view Clustering via Late
  Fusion Alignment Maximization", IJCAI 2019) learns a consensus partition H* (H*^T H* = I)
  that maximises tr(H*^T sum_p beta_p H_p W_p) + lambda tr(H*^T H_0), H_0 the partition of
  the average kernel; H* is then clustered by k-means.
* **OPLFMVC** (Liu, Liu, Liao, Wang, Zhang, Tu, Tang, Liu, Zhu, "One Pass Late Fusion
  Multi-view Clustering", ICML 2021) replaces H* by Y C, a one-hot indicator Y (n x k) times
  an orthogonal k x k matrix C, so the labels come out of the optimisation itself.

Each step of both alternations is an orthogonal Procrustes problem (solved by the polar
factor U V^T of an SVD) or a closed-form weight update. The code follows the equations of
the papers as the authors' MATLAB code applies them (repositories
``wangsiwei2010/latefusionalignment``, ``multikernelLatefusionAlignmentclustering4.m``, and
``xinwangliu/onePassLateFusionMVC``, ``onePassLateFusionMVCBeta.m``): same starts, same order
of the updates, same stop rules.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy.linalg import svd

from ..engine.postprocess import kmeans_best_of
from ..errors import Param, ParameterError
from ._base import MultipleKernelClustering, Solution, stop_rule, top_eigenpairs, unit_rows

#: LF-MVC's threshold below which a view's rotation W_p is no longer updated (the authors' code).
WEIGHT_FLOOR = 1e-4


def polar_factor(a: np.ndarray) -> np.ndarray:
    """The orthogonal polar factor U V^T of ``a`` (thin SVD ``a = U S V^T``).

    It solves the Procrustes problem max tr(X^T a) over X with orthonormal columns, the
    H*, W_p and C steps of LF-MVC and OPLFMVC.

    Parameters
    ----------
    a : ndarray of shape (r, c), r >= c

    Returns
    -------
    ndarray of shape (r, c)
        With orthonormal columns.
    """
    u, _, vt = svd(a, full_matrices=False)
    return u @ vt


def base_partitions(kernels: np.ndarray, n_clusters: int) -> np.ndarray:
    """The base partitions H_p of both late-fusion papers: top-k eigenvectors of each kernel.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
        Each symmetrised as (K + K^T)/2 first.
    n_clusters : int
        k, 1 <= k <= n.

    Returns
    -------
    ndarray of shape (m, n, k)
        ``out[p]``: the eigenvectors of the k largest eigenvalues of ``kernels[p]``, largest
        first (as MATLAB's ``eigs(K, k, 'la')`` orders them; signs and, for repeated
        eigenvalues, the basis are LAPACK's).
    """
    return np.stack([top_eigenpairs(kp, n_clusters, symmetrise=True)[1][:, ::-1] for kp in kernels])


def fused_partition(partitions: np.ndarray, rotations: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """sum_p weights_p H_p W_p, the weighted, rotated base partitions.

    Parameters
    ----------
    partitions : ndarray of shape (m, n, k)
    rotations : ndarray of shape (m, k, k)
    weights : ndarray of shape (m,)

    Returns
    -------
    ndarray of shape (n, k)
    """
    return np.sum(weights[:, None, None] * (partitions @ rotations), axis=0)


def orthonormal_centroids(embedding: np.ndarray, labels: np.ndarray, n_clusters: int) -> np.ndarray:
    """OPLFMVC's start C0: an orthonormal basis of the span of the k-means centroids.

    Parameters
    ----------
    embedding : ndarray of shape (n, k)
        The clustered points (OPLFMVC: the row-normalised partition of the average kernel).
    labels : ndarray of shape (n,)
        Their k-means labels, 0..k-1.
    n_clusters : int

    Returns
    -------
    ndarray of shape (k, k)
        The left singular vectors of the centroid matrix (row j: the mean of cluster j), as
        MATLAB's ``orth`` returns them for a full-rank matrix.
    """
    onehot = np.eye(n_clusters)[labels]
    counts = np.maximum(onehot.sum(axis=0), 1.0)
    centroids = (onehot.T @ embedding) / counts[:, None]
    u, _, _ = svd(centroids)
    return u


def _check_init(value: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    """``value`` as a float64 array of ``shape``, or a :class:`ParameterError` naming ``name``."""
    a = np.asarray(value, dtype=np.float64)
    if a.shape != shape:
        raise ParameterError("{} must have shape {}, got {}", Param(name), shape, a.shape)
    if not np.isfinite(a).all():
        raise ParameterError("{} has a non-finite value", Param(name))
    return a


def _partitions(est: Any, kernels: np.ndarray, k: int) -> np.ndarray:
    """The estimator's ``init_partitions`` checked, or :func:`base_partitions` of the kernels."""
    m, n, _ = kernels.shape
    if est.init_partitions is None:
        return base_partitions(kernels, k)
    return _check_init(est.init_partitions, (m, n, k), "init_partitions")


class LFMVC(MultipleKernelClustering):
    """LF-MVC: multi-view clustering via late fusion alignment maximization.

    Wang, Liu, Zhu, Tang, Liu, Hu, Xia and Yin, "Multi-view Clustering via Late Fusion
    Alignment Maximization", IJCAI 2019 (called LF-MVC-GAM in the authors' repository
    ``wangsiwei2010/latefusionalignment``). With base partitions H_p (top-k eigenvectors of
    K_p) and H_0 (of the average kernel sum_p K_p / m), it solves::

        max tr(H*^T sum_p gamma_p H_p W_p) + lambda tr(H*^T H_0)
        s.t. H*^T H* = I_k, W_p^T W_p = I_k, ||gamma||_2 = 1, gamma >= 0

    by the paper's three-step alternation, each step in closed form: H* = polar factor of
    sum_p gamma_p H_p W_p + lambda H_0; W_p = polar factor of gamma_p H_p^T H*; gamma_p
    proportional to tr(H*^T H_p W_p), scaled to unit 2-norm. The start is gamma = 1/m,
    W_p = I. H* is the embedding the common final clustering row-normalises and clusters.

    As the authors' code does (and only so are its outputs reproduced), the fused matrix
    R = sum_p gamma_p H_p W_p is **never reset between iterations**: each iteration adds the
    current sum_p gamma_p H_p W_p to the one before, so the H* step sees the running sum of
    all iterations so far. The objective is computed with a freshly built sum (new gamma and
    W_p) and is therefore not monotone. W_p is updated only for views with gamma_p > 1e-4.
    Stop rule (the authors'): after iteration t > 2, when ``|obj_{t-1} - obj_t| / |obj_{t-1}| < tol``
    or t > ``max_iter`` (so at most ``max_iter + 1`` iterations).

    Parameters
    ----------
    n_clusters : int
        k, the number of clusters and the width of every partition.
    lambda_ : float
        lambda, the weight of the alignment with the average-kernel partition H_0 (the demo's
        grid: ``2**-15 .. 2**15``).
    max_iter : int
        The iteration cap (the authors' 100).
    tol : float
        Relative change of the objective that stops (the authors' 1e-6).
    preprocess : bool
        Centre and normalise the kernels first (as the authors' demo does).
    n_init : int
        k-means starts of the final clustering.
    random_state : int, RandomState or None
        Seeds the final k-means.
    init_partitions : array_like of shape (m, n, k) or None
        The base partitions H_p; None: the top-k eigenvectors of each (preprocessed) kernel.
        Eigenvector signs (and bases of repeated eigenvalues) are arbitrary and change the
        result: pass the ones of another implementation to reproduce its run.
    init_consensus : array_like of shape (n, k) or None
        H_0; None: the top-k eigenvectors of the average kernel.

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (m,)
        gamma (unit 2-norm).
    objective_ : list of float
        The objective after each iteration.
    extra_ : dict
        ``consensus`` (H*, n x k), ``rotations`` (W_p, m x k x k), ``weights_history``
        (gamma after each iteration, n_iter x m).

    Raises
    ------
    ParameterError
        From :meth:`fit` (a ``ValueError``): ``n_clusters`` outside 1..n, ``max_iter`` below 1,
        or an init matrix of the wrong shape or not finite.
    """

    name: ClassVar[str] = "lf-mvc"
    param_grid: ClassVar[dict[str, tuple]] = {"lambda_": tuple(2.0**e for e in range(-15, 16))}

    def __init__(self, n_clusters: int = 2, *, lambda_: float = 1.0, max_iter: int = 100, tol: float = 1e-6,
                 preprocess: bool = True, n_init: int = 50, random_state: int | None = None,
                 init_partitions: Any = None, init_consensus: Any = None) -> None:
        self.n_clusters = n_clusters
        self.lambda_ = lambda_
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state
        self.init_partitions = init_partitions
        self.init_consensus = init_consensus

    def _solve(self, kernels: np.ndarray) -> Solution:
        m, n, _ = kernels.shape
        k = int(self.n_clusters)
        hp = _partitions(self, kernels, k)
        if self.init_consensus is None:
            h0 = base_partitions(kernels.mean(axis=0)[None], k)[0]
        else:
            h0 = _check_init(self.init_consensus, (n, k), "init_consensus")
        lam, max_iter, tol = float(self.lambda_), int(self.max_iter), float(self.tol)
        gamma = np.full(m, 1.0 / m)
        wp = np.repeat(np.eye(k)[None], m, axis=0)
        running = np.zeros((n, k))
        objective: list[float] = []
        history = []
        converged = False
        while True:
            running = running + fused_partition(hp, wp, gamma)  # accumulates: the authors' code never resets it
            hstar = polar_factor(running + lam * h0)
            for p in range(m):
                if gamma[p] > WEIGHT_FLOOR:
                    wp[p] = polar_factor(gamma[p] * (hp[p].T @ hstar))
            coef = np.sum(hstar[None] * (hp @ wp), axis=(1, 2))  # tr(H*^T H_p W_p)
            gamma = coef / np.linalg.norm(coef)
            history.append(gamma)
            objective.append(float(np.sum(hstar * (fused_partition(hp, wp, gamma) + lam * h0))))
            converged = stop_rule(objective, tol)
            if converged or len(objective) > max(max_iter, 2):
                break
        return Solution(kernel_weights=gamma, objective=objective, n_iter=len(objective), converged=converged,
                        embedding=hstar,
                        extra={"consensus": hstar, "rotations": wp, "weights_history": np.array(history)})


class OPLFMVC(MultipleKernelClustering):
    """OPLFMVC: one pass late fusion multi-view clustering (labels without a k-means step).

    Liu, Liu, Liao, Wang, Zhang, Tu, Tang, Liu and Zhu, "One Pass Late Fusion Multi-view
    Clustering", ICML 2021 (authors' code: ``xinwangliu/onePassLateFusionMVC``). With base
    partitions H_p (top-k eigenvectors of K_p) it solves::

        max tr(C^T Y^T sum_p beta_p H_p W_p)
        s.t. Y in {0, 1}^{n x k} one-hot rows, C^T C = I_k, W_p^T W_p = I_k,
             ||beta||_2 = 1, beta >= 0

    by the paper's four-step alternation, each step in closed form, in the authors' order:
    (1) Y: the one-hot argmax of each row of R C^T, R = sum_p beta_p H_p W_p;
    (2) C: the polar factor of Y^T R; (3) beta_p proportional to tr((Y C)^T H_p W_p) (with the
    W_p of the previous pass), entries below machine epsilon set to 0, unit 2-norm;
    (4) W_p: the polar factor of H_p^T Y C. The objective tr((Y C)^T R) (R rebuilt) never
    decreases. Start: beta = 1/sqrt(m), W_p = I, C = C0. The labels are the argmax of the last
    Y; they are returned as they are (no final k-means, so ``n_init`` only serves C0).

    C0 (the authors' ``myInitializationC``): the top-k eigenvectors of the average kernel,
    rows to unit length, clustered by k-means; C0 = an orthonormal basis (left singular
    vectors) of the k x k centroid matrix. The authors' k-means (MATLAB's, 30 replicates,
    200 iterations, seed 0) cannot be reproduced: ours is
    :func:`~lswmkc_dask.engine.postprocess.kmeans_best_of` with ``n_init`` starts seeded by
    ``random_state``. Pass ``init_centroids`` (and ``init_partitions``) to start elsewhere.

    Stop rule (the authors'): after pass t > 2, when ``|obj_t - obj_{t-1}| / |obj_t| < tol``
    or t > ``max_iter``.

    Parameters
    ----------
    n_clusters : int
        k.
    max_iter : int
        The pass cap (the authors' 100).
    tol : float
        Relative change of the objective that stops (the authors' 1e-4).
    preprocess : bool
        Centre and normalise the kernels first.
    n_init : int
        k-means starts behind C0 (the authors' 30 replicates).
    random_state : int, RandomState or None
        Seeds the k-means behind C0.
    init_partitions : array_like of shape (m, n, k) or None
        The base partitions H_p; None: the top-k eigenvectors of each (preprocessed) kernel
        (the authors add 1e-8 I to each kernel first, which changes no eigenvector).
    init_centroids : array_like of shape (k, k) or None
        C0; None: from k-means as described above.

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (m,)
        beta (unit 2-norm).
    labels_ : ndarray of shape (n,)
        The column of the 1 in each row of Y (0..k-1; a label may be unused).
    extra_ : dict
        ``fused`` (the continuous R C^T whose row argmax gave the labels, n x k), ``centroids``
        (C), ``rotations`` (W_p), ``weights_history`` (beta after each pass), ``init_centroids``
        (C0 as used).

    Raises
    ------
    ParameterError
        From :meth:`fit` (a ``ValueError``): ``n_clusters`` outside 1..n, ``max_iter`` below 1,
        or an init matrix of the wrong shape or not finite.
    """

    name: ClassVar[str] = "oplfmvc"
    param_grid: ClassVar[dict[str, tuple]] = {}

    def __init__(self, n_clusters: int = 2, *, max_iter: int = 100, tol: float = 1e-4, preprocess: bool = True,
                 n_init: int = 30, random_state: int | None = None, init_partitions: Any = None,
                 init_centroids: Any = None) -> None:
        self.n_clusters = n_clusters
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state
        self.init_partitions = init_partitions
        self.init_centroids = init_centroids

    def _start_centroids(self, kernels: np.ndarray, k: int) -> np.ndarray:
        """C0: ``init_centroids`` checked, or the orthonormalised k-means centroids."""
        if self.init_centroids is not None:
            return _check_init(self.init_centroids, (k, k), "init_centroids")
        h = unit_rows(base_partitions(kernels.mean(axis=0)[None], k)[0])
        labels, _ = kmeans_best_of(h, k, int(self.n_init), self.random_state, max_iter=200)
        return orthonormal_centroids(h, labels, k)

    def _solve(self, kernels: np.ndarray) -> Solution:
        m, n, _ = kernels.shape
        k = int(self.n_clusters)
        hp = _partitions(self, kernels, k)
        c0 = self._start_centroids(kernels, k)
        max_iter, tol = int(self.max_iter), float(self.tol)
        c = c0
        beta = np.full(m, np.sqrt(1.0 / m))
        wp = np.repeat(np.eye(k)[None], m, axis=0)
        fused = fused_partition(hp, wp, beta)
        objective: list[float] = []
        history = []
        converged = False
        eye = np.eye(k)
        while True:
            scores = fused @ c.T
            labels = np.argmax(scores, axis=1)
            y = eye[labels]
            c = polar_factor(y.T @ fused)
            hstar = y @ c
            coef = np.sum(hstar[None] * (hp @ wp), axis=(1, 2))  # tr(H*^T H_p W_p)
            beta = coef / np.linalg.norm(coef)
            beta[beta < np.finfo(np.float64).eps] = 0.0
            beta = beta / np.linalg.norm(beta)
            wp = np.stack([polar_factor(hp[p].T @ hstar) for p in range(m)])
            fused = fused_partition(hp, wp, beta)
            history.append(beta)
            objective.append(float(np.sum(hstar * fused)))
            converged = stop_rule(objective, tol, scale=-1)
            if converged or len(objective) > max(max_iter, 2):
                break
        return Solution(kernel_weights=beta, objective=objective, n_iter=len(objective), converged=converged,
                        labels=labels,
                        extra={"fused": scores, "centroids": c, "rotations": wp, "weights_history": np.array(history),
                               "init_centroids": c0})
