"""SimpleMKKM and its localised form LSMKKM (UWL-SMKKM): min-max MKKM by reduced gradient descent.

SimpleMKKM (Liu, Zhu, Liu, Hospedales, Wang, Wang, "SimpleMKKM: Simple Multiple Kernel
K-means", IEEE Transactions on Pattern Analysis and Machine Intelligence, 2023) learns the
weights on the simplex of

    min_{gamma in Delta} J(gamma),   J(gamma) = max_{H^T H = I_k} Tr(H^T K_gamma H),
    K_gamma = sum_p gamma_p^2 K_p

(as restated in Liu, Liu, Peng, Zhang, Hu, "Sample Adaptive Localized Simple Multiple Kernel
K-means", manuscript submitted to IEEE TPAMI, 2022, the journal version of LSMKKM shipped
with the authors' code as ``Localized_SimpleMKKM.pdf``: Eqs. (3)-(5)). J is differentiable
with ``dJ/dgamma_p = 2 gamma_p Tr(H*^T K_p H*)`` (H* the top-k eigenvectors of K_gamma); the
reduced gradient (Eqs. (6)-(7), the base coordinate u the largest weight) and the feasible
descent direction (Eq. (8)) give a direction along which a step is chosen by projected
descent and a golden-section line search (Algorithm 1).

LSMKKM (Xinwang Liu et al., "Localized Simple Multiple Kernel K-means", IEEE/CVF
International Conference on Computer Vision (ICCV), 2021; the UWL-SMKKM of the journal
version, Eqs. (9)-(11)) is the same optimisation with every kernel replaced by ``A o K_p``
(element-wise product), where ``A = sum_i S_i S_i^T`` counts, for each pair of samples, the
neighbourhoods (the ``round(tau n)`` nearest samples of each sample in the average kernel)
holding both (Theorem 1 of the journal version).

Both follow the authors' code (GitHub ``xinwangliu/SimpleMKKMcodes``: ``simpleMKKM``,
``simpleMKKMupdate``; ``xinwangliu/LocalizedSMKKM``: ``localizedSimpleMKKM``) step for
step: the step cap 0.1, the numerical cleaning of small weights, which of the line
search's H is carried to the next gradient, and the stop rule ``max_p |gamma_p - gamma_p^old|
< tol``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..core.equations import combine_kernels
from ._base import MultipleKernelClustering, Solution, top_eigenpairs
from ._lkam import neighbour_count, neighbourhood_counts
from ._mkkm import projected_traces, truncate_weights

#: (sigma) -> (cost, H): J at a weight vector and its maximiser H.
CostFunction = Callable[[np.ndarray], tuple[float, np.ndarray]]
#: The golden ratio of the line search.
GOLD = (math.sqrt(5.0) + 1.0) / 2.0
#: The authors' cap of the first step along the descent direction.
MAX_STEP = 0.1


@dataclass
class LineSearch:
    """Settings of :func:`reduced_gradient_step` (the authors' ``option`` fields).

    Attributes
    ----------
    golden_tol : float
        The golden-section search stops when its interval is below ``golden_tol`` times the
        largest feasible step (``goldensearch_deltmax``).
    precision : float
        Weights below it are set to zero (``numericalprecision``).
    """

    golden_tol: float
    precision: float


def _descent_direction(sigma: np.ndarray, grad: np.ndarray) -> tuple[np.ndarray, int]:
    """Eqs. (6)-(8): the feasible descent direction from the normalised gradient, and u."""
    g = grad / math.sqrt(float(grad @ grad))
    u = int(np.argmax(sigma))
    g = g - g[u]
    desc = -g * ((sigma > 0) | (g < 0))
    desc[u] = -desc.sum()
    return desc, u


def _largest_step(sigma: np.ndarray, desc: np.ndarray) -> float | None:
    """The step that brings the first weight to zero along ``desc`` (None: no weight decreases)."""
    down = desc < 0
    if not bool(np.any(down)):
        return None
    return float(np.min(np.where(down, -sigma / np.where(down, desc, -1.0), np.inf)))


def _golden(cost: CostFunction, sigma: np.ndarray, desc: np.ndarray, lo: tuple[float, float],
            hi: tuple[float, float], delt_max: float, opts: LineSearch,
            h: np.ndarray | None) -> tuple[float, float, np.ndarray | None]:
    """Golden-section search of the step on ``[lo, hi]`` (each (step, cost)); (step, cost, H) as the authors'."""
    (step_min, cost_min), (step_max, cost_max) = lo, hi
    steps, costs = [step_min, step_max], [cost_min, cost_max]
    best = int(np.argmin(costs))
    while step_max - step_min > opts.golden_tol * abs(delt_max) and step_max > np.finfo(np.float64).eps:
        step_r = step_min + (step_max - step_min) / GOLD
        step_l = step_min + (step_r - step_min) / GOLD
        cost_r, h_r = cost(sigma + step_r * desc)
        cost_l, h_l = cost(sigma + step_l * desc)
        steps = [step_min, step_l, step_r, step_max]
        costs = [cost_min, cost_l, cost_r, cost_max]
        best = int(np.argmin(costs))
        if best == 0:
            step_max, cost_max, h = step_l, cost_l, h_l
        elif best == 1:
            step_max, cost_max, h = step_r, cost_r, h_r
        elif best == 2:
            step_min, cost_min, h = step_l, cost_l, h_l
        else:
            step_min, cost_min, h = step_r, cost_r, h_r
    return steps[best], costs[best], h


def reduced_gradient_step(cost: CostFunction, sigma: np.ndarray, grad: np.ndarray, cost_old: float,
                          opts: LineSearch) -> tuple[np.ndarray, np.ndarray | None, float]:
    """One weight update of SimpleMKKM: reduced-gradient direction, projected descent, golden search.

    From Eqs. (6)-(8) of the journal version of LSMKKM (restating SimpleMKKM, Liu et al., IEEE
    TPAMI 2023): move along the feasible descent direction by the largest feasible step
    (capped at 0.1 the first time) while the cost decreases, zeroing weights below
    ``opts.precision`` and renormalising after each move; then search the step on the last
    interval by golden section. As the authors' ``simpleMKKMupdate``, the returned H is the
    one the line search last kept (not always the H of the returned weights), and the new
    cost is the least cost of the search's last bracket.

    Parameters
    ----------
    cost : callable
        ``sigma (m,) -> (J(sigma), H (n, k))``.
    sigma : ndarray of shape (m,)
        Current weights, on the simplex.
    grad : ndarray of shape (m,)
        ``dJ/dsigma`` at ``sigma`` (all zero: no step).
    cost_old : float
        ``J(sigma)``.
    opts : LineSearch

    Returns
    -------
    sigma : ndarray of shape (m,)
        The new weights (``sigma`` itself when no weight can decrease or the gradient is zero).
    h : ndarray of shape (n, k) or None
        The H to take the next gradient at (None: no cost was evaluated).
    cost : float
    """
    if not bool(np.any(grad != 0)):
        return sigma, None, cost_old
    desc, u = _descent_direction(sigma, grad)
    step_max = _largest_step(sigma, desc)
    if step_max is None or step_max == 0:
        return sigma, None, cost_old
    delt_max = step_max
    step_max = min(step_max, MAX_STEP)
    sigma_new = sigma.copy()
    cost_min, cost_max, h = cost_old, 0.0, None
    while cost_max < cost_min:
        cost_max, h = cost(sigma_new + step_max * desc)
        if cost_max < cost_min:
            cost_min = cost_max
            sigma_new = truncate_weights(sigma_new + step_max * desc, opts.precision)
            desc = desc * ((sigma_new > opts.precision) | (desc > 0))
            desc[u] = -np.sum(np.where(np.arange(desc.shape[0]) == u, 0.0, desc))
            largest = _largest_step(sigma_new, desc)
            if largest is None:
                step_max = delt_max = 0.0
            else:
                step_max = delt_max = largest
                cost_max = 0.0
    step, cost_new, h = _golden(cost, sigma_new, desc, (0.0, cost_min), (step_max, cost_max), delt_max, opts, h)
    if cost_new < cost_old:
        sigma_new = sigma_new + step * desc
    return sigma_new, h, cost_new


def _minimise(kernels: np.ndarray, est: SimpleMKKM) -> Solution:
    """Algorithm 1: reduced gradient steps from ``1/m`` until the weights move less than ``tol``.

    The cost J(sigma) is the value ``Tr(H^T K H)`` of the top-k eigenvectors H of the
    symmetrised ``K = sum_p sigma_p^2 K_p`` (``kernels``: LSMKKM's ``A o K_p``).
    """
    m, k = kernels.shape[0], int(est.n_clusters)

    def cost(sigma: np.ndarray) -> tuple[float, np.ndarray]:
        combined = combine_kernels(kernels, sigma * sigma)
        combined = (combined + combined.T) / 2.0
        _, h = top_eigenpairs(combined, k)
        return float(np.trace(h.T @ combined @ h)), h

    golden_tol = float(est.golden_tol)
    opts = LineSearch(golden_tol, float(est.numerical_precision))
    sigma = np.full(m, 1.0 / m)
    value, h = cost(sigma)
    objective, history = [value], [sigma]
    converged = False
    while len(objective) < int(est.max_iter):
        grad = 2.0 * sigma * projected_traces(kernels, h)
        sigma_new, h_new, value = reduced_gradient_step(cost, sigma, grad, objective[-1], opts)
        h = h if h_new is None else h_new
        objective.append(value)
        history.append(sigma_new)
        change = float(np.max(np.abs(sigma_new - sigma)))
        # The authors' refinement of the line search when the weights stall, undone on the
        # next move as LSMKKM's code does (SimpleMKKM's code omits the undoing assignment).
        # It matters only when numerical_precision > tol: otherwise the loop stops first.
        if change < opts.precision and opts.golden_tol > float(est.golden_tol_min):
            opts.golden_tol /= 10.0
        elif opts.golden_tol != golden_tol:
            opts.golden_tol *= 10.0
        sigma = sigma_new
        if change < float(est.tol):
            converged = True
            break
    return Solution(kernel_weights=sigma, objective=objective, n_iter=len(objective), converged=converged,
                    embedding=h, extra={"sigma_history": np.array(history), "h": h})


class SimpleMKKM(MultipleKernelClustering):
    """SimpleMKKM (Liu et al., IEEE TPAMI 2023): min over the simplex of the kernel k-means value.

    Weights ``sigma`` from ``1/m`` by :func:`reduced_gradient_step` until
    ``max_p |sigma_p - sigma_p^old| < tol``; the kernel k-means step is the top-k
    eigenvectors of ``(K + K^T)/2``, ``K = sum_p sigma_p^2 K_p``, and its value ``Tr(H^T K H)``
    is the objective (no ``-Tr(K)`` term). Defaults are the authors' demo
    (``Demo_of_SimpleMKKM``). The clustered embedding is the authors' returned H (the
    H the last line search kept), rows to unit length, then k-means.

    Parameters
    ----------
    n_clusters : int
        k.
    tol : float
        Stop when no weight moved more than this (``seuildiffsigma``, 1e-5).
    golden_tol : float
        Relative precision of the golden-section search (``goldensearch_deltmax``, 1e-3).
    golden_tol_min : float
        Least ``golden_tol`` the stalled-weights refinement may reach (1e-8).
    numerical_precision : float
        Weights below it are set to zero (1e-16).
    max_iter : int
        Cap on the objective evaluations of the main loop (the authors' loop has none; 500).
    preprocess : bool
        Centre and normalise the kernels first (the demo's ``kcenter``, ``knorm``).
    n_init : int
        k-means starts of the final clustering.
    random_state : int or None
        Seed of the final k-means.

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (m,)
        sigma, on the simplex; the combined kernel is ``sum_p sigma_p^2 K_p``.
    objective_ : list of float
        J at the start and after each weight update.
    n_iter_ : int
        ``len(objective_)``: 1 + the number of weight updates.
    converged_ : bool
    extra_ : dict
        ``sigma_history`` (n_iter, m): the weights at each gradient (row 0 is ``1/m``);
        ``h`` (n, k): the embedding before its rows are normalised.
    labels_ : ndarray of shape (n,)

    Raises
    ------
    ParameterError
        From :meth:`fit`: a non-positive ``tol``, ``golden_tol`` or ``golden_tol_min``, a
        negative ``numerical_precision``, ``n_clusters`` outside 1..n or ``max_iter < 1``.
    """

    name: ClassVar[str] = "smkkm"
    param_grid: ClassVar[dict[str, tuple]] = {}
    positive_params: ClassVar[tuple[str, ...]] = ("tol", "golden_tol", "golden_tol_min")
    non_negative_params: ClassVar[tuple[str, ...]] = ("numerical_precision",)

    def __init__(self, n_clusters: int = 2, *, tol: float = 1e-5, golden_tol: float = 1e-3,
                 golden_tol_min: float = 1e-8, numerical_precision: float = 1e-16, max_iter: int = 500,
                 preprocess: bool = True, n_init: int = 50, random_state: int | None = None) -> None:
        self.n_clusters = n_clusters
        self.tol = tol
        self.golden_tol = golden_tol
        self.golden_tol_min = golden_tol_min
        self.numerical_precision = numerical_precision
        self.max_iter = max_iter
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state

    def _solve(self, kernels: np.ndarray) -> Solution:
        return _minimise(kernels, self)


class LocalizedSimpleMKKM(SimpleMKKM):
    """LSMKKM, the UWL-SMKKM variant (Liu et al., ICCV 2021): SimpleMKKM on ``A o K_p``.

    ``A`` is :func:`~lswmkc_dask.methods._lkam.neighbourhood_counts` of the average kernel ``(1/m) sum_p K_p`` with
    ``round(tau n)`` neighbours (or ``n_neighbors``); the kernel k-means step takes the top-k
    eigenvectors of ``A o K``, ``K = sum_p sigma_p^2 K_p``, its value ``Tr(H^T (A o K) H)``
    is the objective, and the gradient is ``2 sigma_p Tr(H^T (A o K_p) H)``. Defaults are the
    authors' demo (``Demo_UWL_SMKKM``, whose second ``seuildiffsigma`` applies).

    Parameters
    ----------
    n_clusters : int
        k.
    tau : float
        Neighbourhood size as a fraction of n, in (0, 1] (the demo's 0.4); the number of
        neighbours is ``round(tau n)``, halves rounded up as MATLAB's ``round``.
    n_neighbors : int or None
        The number of neighbours itself, in place of ``tau`` (a value such as the authors'
        recorded ``numSel``, free of the rounding of ``tau n``).
    tol : float
        ``seuildiffsigma`` (5e-3).
    golden_tol : float
        ``goldensearch_deltmax`` (1e-1).
    golden_tol_min : float
        ``goldensearchmax`` (1e-3).
    numerical_precision : float
        1e-10.
    max_iter : int
        Cap on the objective evaluations (500).
    preprocess, n_init, random_state
        As :class:`SimpleMKKM`.

    Attributes
    ----------
    kernel_weights_, objective_, n_iter_, converged_, labels_
        As :class:`SimpleMKKM`.
    extra_ : dict
        ``sigma_history`` and ``h`` as :class:`SimpleMKKM`; ``n_neighbors``: the neighbourhood size used.

    Raises
    ------
    ParameterError
        From :meth:`fit`: ``tau`` outside (0, 1], ``n_neighbors`` outside ``[1, n]``, and
        the options of :class:`SimpleMKKM`.
    """

    name: ClassVar[str] = "lsmkkm"
    #: tau from 0.05 to 0.95 by 0.05, the journal version's sensitivity grid (the demo's 0.4 among them)
    param_grid: ClassVar[dict[str, tuple]] = {"tau": tuple(round(0.05 * i, 2) for i in range(1, 20))}

    def __init__(self, n_clusters: int = 2, *, tau: float = 0.4, n_neighbors: int | None = None,
                 tol: float = 5e-3, golden_tol: float = 1e-1, golden_tol_min: float = 1e-3,
                 numerical_precision: float = 1e-10, max_iter: int = 500, preprocess: bool = True,
                 n_init: int = 50, random_state: int | None = None) -> None:
        super().__init__(n_clusters, tol=tol, golden_tol=golden_tol, golden_tol_min=golden_tol_min,
                         numerical_precision=numerical_precision, max_iter=max_iter, preprocess=preprocess,
                         n_init=n_init, random_state=random_state)
        self.tau = tau
        self.n_neighbors = n_neighbors

    def _solve(self, kernels: np.ndarray) -> Solution:
        m, n = kernels.shape[0], kernels.shape[1]
        n_neighbors = neighbour_count(self.tau, self.n_neighbors, n, most=n)
        a = neighbourhood_counts(combine_kernels(kernels, np.full(m, 1.0 / m)), n_neighbors)
        sol = _minimise(kernels * a, self)
        sol.extra["n_neighbors"] = n_neighbors
        return sol
