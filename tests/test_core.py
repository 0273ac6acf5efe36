"""The equations of lswmkc_dask.core.equations (and the gathered step) against brute force (scipy QP, explicit PSD projection) and invariants."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from lswmkc_dask.core import equations as core
from lswmkc_dask.core import eigen as _eigen
from lswmkc_dask.engine import _gathered, _memory


def _qp_scipy(quad, lin, exclude):
    """min quad ||x||^2 - lin.x s.t. x >= 0, sum x = 1, x[exclude] = 0, by scipy SLSQP."""
    n = lin.size
    bounds = [(0.0, 0.0) if j == exclude else (0.0, None) for j in range(n)]
    res = minimize(
        lambda x: quad * x @ x - lin @ x,
        np.full(n, 1.0 / n),
        jac=lambda x: 2 * quad * x - lin,
        bounds=bounds,
        constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0, "jac": lambda x: np.ones(n)}],
        method="SLSQP",
        options={"ftol": 1e-12, "maxiter": 1000},
    )
    assert res.success, res.message
    return res.x


def _qp_exhaustive(quad, lin, exclude):
    """The same QP solved exactly by trying every support set (small n only)."""
    n = lin.size
    others = [j for j in range(n) if j != exclude]
    best, best_x = np.inf, None
    for mask in range(1, 2 ** len(others)):
        support = [others[t] for t in range(len(others)) if mask >> t & 1]
        # Stationarity on the support: 2 quad x_j - lin_j = mu, sum x_j = 1.
        mu = (2 * quad - lin[support].sum()) / len(support)
        x = np.zeros(n)
        x[support] = (lin[support] + mu) / (2 * quad)
        if (x >= -1e-15).all():
            f = quad * x @ x - lin @ x
            if f < best:
                best, best_x = f, x
    return best_x


@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0])
def test_projection_matches_qp(rng, scale):
    """Theorem 1: the projection solves min 1/2||z - v||^2 on the simplex with z_ii = 0."""
    v = scale * rng.normal(size=(6, 9))
    exclude = np.array([0, 3, 8, 1, 2, 5])
    z = core.project_rows_simplex(v, exclude)
    for i in range(v.shape[0]):
        # 1/2||z - v||^2 = 1/2||z||^2 - v.z + const
        np.testing.assert_allclose(z[i], _qp_exhaustive(0.5, v[i], exclude[i]), atol=1e-12)
        if scale <= 1.0:
            np.testing.assert_allclose(z[i], _qp_scipy(0.5, v[i], exclude[i]), atol=1e-5)
    np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-12)
    assert (z >= 0).all()
    assert (z[np.arange(6), exclude] == 0).all()


def _rows_with_supports(rng, n=3000):
    """Rows whose supports need the first partial sort (128 entries), the second (1024)
    and the full sort, plus rows of few distinct values (ties at and around theta)."""
    out = [rng.normal(size=(4, n)), rng.integers(0, 3, size=(3, n)).astype(float)]
    for k in (100, 127, 128, 500, 1023, 1024, 2000):
        row = np.full((2, n), -1.0)
        row[:, :k] = 1.0 / k + 1e-7 * rng.normal(size=(2, k))
        out.append(rng.permuted(row, axis=1))
    return np.vstack(out)


def test_partial_sort_projection_is_bitwise_the_full_sort(rng):
    """Theorem 1 on NumPy: the projection from the largest entries of each row (top 128,
    then 1024, then the whole row) is bit for bit the one from fully sorted rows (what the
    resident route runs): the cumulative sum runs left to right, so its first k entries
    are the cumulative sum of the k largest."""
    v = _rows_with_supports(rng)
    exclude = rng.integers(0, v.shape[1], size=v.shape[0])
    full = core.project_rows_simplex(v, exclude, full_sort=True)
    supports = np.count_nonzero(full, axis=1)
    assert supports.min() < 128 and ((supports > 128) & (supports < 1024)).any() and supports.max() > 1024
    np.testing.assert_array_equal(core.project_rows_simplex(v, exclude), full)
    np.testing.assert_array_equal(core.project_rows_simplex(v, exclude, sparse=True).toarray(), full)
    u = -np.sort(-v, axis=1)
    np.testing.assert_array_equal(np.cumsum(u, axis=1)[:, :128], np.cumsum(u[:, :128], axis=1))
    theta, rho = core.simplex_threshold(u, np)
    small = rho < 128
    theta_top, rho_top = core.simplex_threshold(u[:, :128], np)
    np.testing.assert_array_equal(theta_top[small], theta[small])
    np.testing.assert_array_equal(rho_top[small], rho[small])


def test_initial_neighbours_partition_is_bitwise_the_full_sort(rng):
    """Eqs. (25)-(28) on NumPy: the c + 2 smallest from a partition give the weights and
    gamma of a stable sort of each whole row bit for bit, ties broken by column index."""
    n, c = 40, 5
    k = rng.integers(0, 4, size=(n, n)).astype(float)  # many ties among the c + 2 nearest
    for combined in (k + k.T, rng.normal(size=(n, n))):
        for start, stop in [(0, 17), (17, n)]:
            idx, z, gamma = core.initial_neighbours(combined[start:stop], start, c)
            idx_f, z_f, gamma_f = core.initial_neighbours(combined[start:stop], start, c, full_sort=True)
            np.testing.assert_array_equal(z, z_f)
            np.testing.assert_array_equal(gamma, gamma_f)
            np.testing.assert_array_equal(np.where(z > 0, idx, -1), np.where(z_f > 0, idx_f, -1))
            assert not np.any(idx == np.arange(start, stop)[:, None])


def test_graph_rows_solve_eq13_qp(rng):
    """Z rows minimise (gamma_i + alpha)||z||^2 - (2 alpha K*_i + Kw_i) z on the simplex (Eq. 13)."""
    n, alpha = 8, 3.0
    kw = rng.normal(size=(n, n))
    kstar = rng.normal(size=(n, n))
    gamma = rng.uniform(0.5, 2.0, size=n)
    z = core.graph_rows(kw, kstar, gamma, alpha, 0, sparse=True).toarray()
    for i in range(n):
        lin = 2 * alpha * kstar[i] + kw[i]
        q = gamma[i] + alpha
        np.testing.assert_allclose(z[i], _qp_exhaustive(q, lin, i), atol=1e-12)
        np.testing.assert_allclose(z[i], _qp_scipy(q, lin, i), atol=1e-5)
        assert z[i, i] == 0.0


@pytest.mark.parametrize("driver", ["mrrr", "evd", "subset"])
def test_psd_factor_is_projection(rng, driver):
    n = 40
    z = np.abs(rng.normal(size=(n, n))) * (rng.random((n, n)) < 0.2)
    np.fill_diagonal(z, 0.0)
    z /= np.maximum(z.sum(axis=1, keepdims=True), 1e-12)
    w, lam = _eigen.psd_factor(sp.csr_matrix(z), driver=driver)
    kstar = w @ w.T
    s = (z + z.T) / 2
    ev, u = np.linalg.eigh(s)
    explicit = (u * np.maximum(ev, 0)) @ u.T
    np.testing.assert_allclose(kstar, explicit, atol=1e-10)
    assert np.linalg.eigvalsh(kstar).min() > -1e-10
    assert (lam > 0).all()
    # Theorem 2: no PSD matrix is closer to Z (random PSD perturbations do worse).
    best = np.linalg.norm(kstar - z)
    for _ in range(20):
        g = rng.normal(size=(n, 3)) * 0.05
        assert np.linalg.norm(kstar + g @ g.T - z) >= best - 1e-12


def _split_graph(rng, sizes):
    """A row-stochastic graph of disconnected components (block diagonal, so that its
    tridiagonal form splits into one block per component)."""
    blocks = []
    for size in sizes:
        b = np.abs(rng.normal(size=(size, size)))
        np.fill_diagonal(b, 0.0)
        blocks.append(b / b.sum(axis=1, keepdims=True))
    return sp.block_diag(blocks).toarray()


@pytest.mark.parametrize(
    "case",
    ["components", "diagonal", "negative", "repeated"],
)
def test_psd_factor_routes_agree(rng, case):
    """Every eigen route gives the same K* (1e-10), also where the tridiagonal splits."""
    if case == "components":  # block diagonal: the tridiagonal matrix splits
        z = _split_graph(rng, [7, 2, 13, 5])
    elif case == "diagonal":  # every off-diagonal zero: n blocks of one
        z = np.diag(rng.normal(size=12))
    elif case == "negative":  # no positive eigenvalue: K* = 0
        z = -np.eye(9) - 0.1
    else:  # a complete graph: eigenvalue -1/(n-1) repeated n - 1 times
        n = 30
        z = (np.ones((n, n)) - np.eye(n)) / (n - 1)
    ref = None
    for driver in ("mrrr", "subset", "evd"):
        w, lam = _eigen.psd_factor(sp.csr_matrix(z), driver=driver)
        assert w.shape == (z.shape[0], lam.size) and (lam > 0).all()
        assert np.all(np.diff(lam) >= 0)
        kstar = w @ w.T
        if ref is None:
            ref = kstar
            ev, u = np.linalg.eigh((z + z.T) / 2)
            np.testing.assert_allclose(kstar, (u * np.maximum(ev, 0)) @ u.T, atol=1e-10)
        np.testing.assert_allclose(kstar, ref, atol=1e-10)


def test_psd_factor_mrrr_blocked_back_transformation(rng):
    """n larger than the reflector block (128): the blocked Q equals LAPACK's eigenvectors."""
    n = 300
    z = np.abs(rng.normal(size=(n, n))) * (rng.random((n, n)) < 0.05)
    np.fill_diagonal(z, 0.0)
    z /= np.maximum(z.sum(axis=1, keepdims=True), 1e-12)
    w, lam = _eigen.psd_factor(sp.csr_matrix(z), driver="mrrr")
    u = w / np.sqrt(lam)
    np.testing.assert_allclose(u.T @ u, np.eye(lam.size), atol=1e-10)
    s = (z + z.T) / 2
    np.testing.assert_allclose(s @ u, u * lam, atol=1e-10)
    ev = np.linalg.eigvalsh(s)
    np.testing.assert_allclose(lam, ev[ev > 0], atol=1e-12)


@pytest.mark.parametrize("k", [1, 63, 64, 200, 257])
def test_tridiagonal_eigenpairs_in_ranges_equal_brute_force_on_any_threads(rng, k):
    """The top k eigenpairs of a tridiagonal T by ``dstemr`` in index ranges: the
    eigenvalues of a full eigensolver, orthonormal eigenvectors, and the same bits on
    1, 2 and 3 threads (the number of ranges depends on k only)."""
    from scipy.linalg import eigh_tridiagonal

    n = 400
    d, e = rng.normal(size=n), rng.normal(size=n - 1)
    ranges = max(1, min(_eigen.TRIDIAGONAL_RANGES, k // _eigen.TRIDIAGONAL_MIN_RANGE))
    assert ranges == {1: 1, 63: 1, 64: 1, 200: 3, 257: 4}[k]
    got = {}
    for threads in (1, 2, 3):
        u = np.empty((n, k), order="F")
        lam = _eigen._tridiagonal_eigenpairs(d, e, n - k + 1, n, u, threads)
        got[threads] = lam, u
    ev, vec = eigh_tridiagonal(d, e)
    lam, u = got[1]
    np.testing.assert_allclose(lam, ev[n - k:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(u.T @ u, np.eye(k), atol=1e-10)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    np.testing.assert_allclose(t @ u, u * lam, atol=1e-10)
    np.testing.assert_allclose(np.abs(vec[:, n - k:].T @ u), np.eye(k), atol=1e-8)  # the same vectors, up to sign
    for threads in (2, 3):
        assert np.array_equal(got[threads][0], lam) and np.array_equal(got[threads][1], u)


def test_psd_factor_mrrr_refuses_before_allocating(rng):
    z = sp.csr_matrix(np.ones((50, 50)) - np.eye(50))
    with pytest.raises(MemoryError, match=r"positive eigenvalues at n = 50: the packed reflectors of S .* need .* on one worker"):
        _eigen.psd_factor(z, driver="mrrr", memory_left=8 * 50 * 50 + 100)
    w, lam = _eigen.psd_factor(z, driver="mrrr", memory_left=2**24)  # enough
    assert lam.size == 1
    with pytest.raises(ValueError, match="driver must be"):
        _eigen.psd_factor(z, driver="stein")


def _low_rank_graph(rng, n=600, rank=20):
    """Z of 12 dense clusters, shifted by a multiple of the identity so that exactly
    ``rank`` eigenvalues of (Z + Z^T)/2 are positive (the eigenvectors are unchanged)."""
    labels = rng.integers(12, size=n)
    z = np.abs(rng.normal(size=(n, n))) * (labels[:, None] == labels[None, :]) + 0.01 * rng.random((n, n))
    np.fill_diagonal(z, 0.0)
    z /= z.sum(axis=1, keepdims=True)
    ev = np.linalg.eigvalsh((z + z.T) / 2)
    return z - np.eye(n) * (ev[n - rank - 1] + ev[n - rank]) / 2


@pytest.mark.parametrize("hint", [20, 2, None])
def test_psd_factor_lanczos_equals_dense_routes(rng, hint):
    """The sparse Lanczos route gives the dense routes' K* (1e-10) whatever the rank
    hint: a hint below the rank makes it ask for more eigenpairs until a non-positive
    one is among them; the eigenvalues are the positive ones, ascending."""
    z = _low_rank_graph(rng)
    w_ref, lam_ref = _eigen.psd_factor(z, driver="mrrr")
    assert lam_ref.size == 20
    w, lam = _eigen.psd_factor(sp.csr_matrix(z), driver="lanczos", rank_hint=hint)
    np.testing.assert_allclose(lam, lam_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(w @ w.T, w_ref @ w_ref.T, rtol=0, atol=1e-10)
    w2, _ = _eigen.psd_factor(sp.csr_matrix(z), driver="lanczos", rank_hint=hint)
    assert np.array_equal(w, w2)  # fixed start vector: the same result every time


def test_psd_factor_lanczos_falls_back_for_a_large_positive_part(rng, monkeypatch):
    """More positive eigenvalues than LANCZOS_MAX_K of n: the dense route answers, and
    the memory it needs is asked for before its dense S is built."""
    z = _low_rank_graph(rng, n=300, rank=120)
    called = []
    real = _eigen._positive_eigenpairs_mrrr
    monkeypatch.setattr(_eigen, "_positive_eigenpairs_mrrr", lambda *a: called.append(1) or real(*a))
    asked = []
    w, lam = _eigen.psd_factor(
        sp.csr_matrix(z), driver="lanczos", rank_hint=10, memory_left=lambda route: asked.append(route) or 10**12
    )
    assert called and lam.size == 120
    assert asked == ["mrrr"]  # room for the dense S is asked for just before it is built
    w_ref, _ = _eigen.psd_factor(z, driver="subset")
    np.testing.assert_allclose(w @ w.T, w_ref @ w_ref.T, rtol=0, atol=1e-10)


def test_sparse_s_is_bitwise_the_dense_lower_triangle(rng):
    z = np.abs(rng.normal(size=(50, 50))) * (rng.random((50, 50)) < 0.2)
    blocks = [sp.csr_matrix(z[:17]), sp.csr_matrix(z[17:])]
    dense = _eigen.symmetrised(blocks)
    sparse = _eigen._sparse_s(blocks).toarray()
    assert np.array_equal(np.tril(sparse), np.tril(dense))
    assert np.array_equal(sparse, sparse.T)


def test_kernel_weights_closed_form_is_optimal(rng):
    delta = rng.uniform(0.1, 5.0, size=5)
    w = core.kernel_weights(delta)
    assert np.isclose(np.linalg.norm(w), 1.0)
    res = minimize(
        lambda x: -x @ delta,
        np.full(5, 0.3),
        bounds=[(0, None)] * 5,
        constraints=[{"type": "eq", "fun": lambda x: x @ x - 1.0}],
        method="SLSQP",
        options={"ftol": 1e-14},
    )
    np.testing.assert_allclose(w, res.x, atol=1e-6)
    for _ in range(100):
        x = np.abs(rng.normal(size=5))
        x /= np.linalg.norm(x)
        assert x @ delta <= w @ delta + 1e-12
    with pytest.raises(FloatingPointError, match="kernel weights undefined"):
        core.kernel_weights(np.zeros(3))


def test_kernel_alignment_sparse_equals_dense(rng):
    k = rng.normal(size=(3, 4, 10))
    z = sp.random(4, 10, density=0.3, random_state=1, format="csr")
    np.testing.assert_allclose(core.kernel_alignment(k, z), core.kernel_alignment(k, z.toarray()), atol=1e-12)


def test_init_graph_rows_invariants(yale_store):
    k = yale_store.read_rows(0, yale_store.n_samples)
    m = k.shape[0]
    kw = core.combine_kernels(k, np.full(m, np.sqrt(1 / m)))
    z_all, g_all = core.init_graph_rows(kw, 0, 5)
    # Block-wise gives the same as one block.
    z_b, g_b = core.init_graph_rows(kw[40:90], 40, 5)
    np.testing.assert_array_equal(z_b.toarray(), z_all[40:90].toarray())
    np.testing.assert_array_equal(g_b, g_all[40:90])
    z = z_all.toarray()
    assert (np.count_nonzero(z, axis=1) == 5).all()
    np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-12)
    assert (np.diag(z) == 0).all()
    # The non-zeros are the 5 most similar other samples.
    off = kw.copy()
    np.fill_diagonal(off, -np.inf)
    top = np.argsort(-off, axis=1, kind="stable")[:, :5]
    for i in range(z.shape[0]):
        assert set(np.flatnonzero(z[i])) == set(top[i])


def test_metrics_equal_scikit_learn_on_random_labelings():
    """ACC/NMI/ARI/Purity from one contingency table equal scikit-learn's (and brute force
    for ACC and Purity), including one-cluster and all-singletons labelings."""
    from itertools import permutations

    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    from lswmkc_dask.report.metrics import evaluate

    rng = np.random.default_rng(7)
    cases = [(np.zeros(6, int), np.zeros(6, int)), (np.arange(6), np.arange(6)), (np.zeros(6, int), np.arange(6))]
    for _ in range(150):
        n = int(rng.integers(2, 40))
        cases.append((rng.integers(0, rng.integers(1, 5), n), rng.integers(0, rng.integers(1, 5), n)))
    for y, p in cases:
        got = evaluate(y, p)
        assert got["ARI"] == pytest.approx(adjusted_rand_score(y, p), abs=1e-12)
        assert got["NMI"] == pytest.approx(normalized_mutual_info_score(y, p, average_method="max"), abs=1e-12)
        classes, clusters = np.unique(y), np.unique(p)
        best = 0
        for perm in permutations(range(max(len(classes), len(clusters))), len(clusters)):
            mapping = {c: perm[i] for i, c in enumerate(clusters)}
            best = max(best, sum(classes.tolist().index(a) == mapping[b] if perm[clusters.tolist().index(b)] < len(classes) else 0 for a, b in zip(y, p)))
            if len(clusters) > 4:
                break
        if len(clusters) <= 4 and len(classes) <= 4:
            assert got["ACC"] == pytest.approx(best / len(y))
        purity = sum(np.bincount(np.searchsorted(classes, y[p == c])).max() for c in clusters) / len(y)
        assert got["Purity"] == pytest.approx(purity)


@pytest.mark.parametrize("method", ["svd", "gram"])
@pytest.mark.parametrize("r", [3, 10, 40])
def test_factor_embedding_equals_dense_embedding(r, method, monkeypatch):
    """The embedding from W alone (n x r SVD, or the r x r Gram matrix formed in row
    blocks) equals the dense n x n eigendecomposition of the centred, normalised W W^T,
    including when rank r < k (null-space columns zero)."""
    from lswmkc_dask.engine import postprocess
    from lswmkc_dask.engine.postprocess import factor_embedding, spectral_embedding

    monkeypatch.setattr(postprocess, "GRAM_BLOCK", 64)  # several row blocks
    rng = np.random.default_rng(r)
    w = rng.normal(size=(150, r)) * rng.uniform(0.1, 3.0, size=r)
    dense = spectral_embedding(w @ w.T, 10, grid=None)
    fast = factor_embedding(w, 10, grid=None, method=method)
    np.testing.assert_allclose(fast, dense, atol=1e-9)
    if r < 10:
        assert np.all(fast[:, : 10 - r] == 0)


def test_auto_driver_rule():
    """eig_driver="auto": mrrr first and between the crossover ranks, subset below and
    evd above, each where its memory fits; a rule on the rank, so reruns are bitwise equal."""
    from lswmkc_dask.engine._gathered import EVD_MIN_FRACTION, LANCZOS_MAX_FRACTION, LANCZOS_MIN_N, SUBSET_MAX_FRACTION, _choose_driver

    assert _choose_driver("auto", 100, None) == "mrrr"
    assert _choose_driver("subset", 100, None) == "subset"
    assert _choose_driver("auto", 100, int(SUBSET_MAX_FRACTION * 100)) == "subset"
    assert _choose_driver("auto", 100, int(SUBSET_MAX_FRACTION * 100) + 1) == "mrrr"
    assert _choose_driver("auto", 100, int(EVD_MIN_FRACTION * 100) - 1) == "mrrr"
    assert _choose_driver("auto", 100, int(EVD_MIN_FRACTION * 100)) == "evd"
    # neither evd nor subset fits in memory at this n: mrrr whatever the rank
    assert _choose_driver("auto", 10**6, 10**6) == "mrrr"
    assert _choose_driver("auto", 10**6, 10**5) == "mrrr"
    # a small positive part from n = LANCZOS_MIN_N: the sparse Lanczos route (no dense S)
    n = 2 * LANCZOS_MIN_N
    assert _choose_driver("auto", n, int(LANCZOS_MAX_FRACTION * n)) == "lanczos"
    assert _choose_driver("auto", n, int(LANCZOS_MAX_FRACTION * n) + 1) == "subset"
    assert _choose_driver("auto", 10**6, 10) == "lanczos"
    assert _choose_driver("auto", LANCZOS_MIN_N - 1, 1) == "subset"


def test_symmetrised_from_row_blocks_is_bitwise_the_sparse_route(rng):
    z = sp.random(97, 97, density=0.1, random_state=3, format="csr")  # with some diagonal entries
    blocks = [z[0:30], z[30:31], z[31:97]]
    s = _eigen.symmetrised(blocks)
    assert s.flags.f_contiguous
    np.testing.assert_array_equal(s, np.tril(((z + z.T) * 0.5).toarray()))
    w1, lam1 = _eigen.psd_factor(blocks)
    w2, lam2 = _eigen.psd_factor(z)
    np.testing.assert_array_equal(lam1, lam2)
    with pytest.raises(ValueError, match="row blocks cover 30 rows"):
        _eigen.symmetrised(blocks[:1])


def test_s_is_resident_in_its_lower_half(rng):
    """S built from the row blocks and reduced to tridiagonal form occupies only its lower
    triangle's pages (the upper triangle is never written), about n^2/2 x 8 bytes."""
    import psutil

    from lswmkc_dask.core import lapack as _lapack

    n = 3000
    z = sp.random(n, n, density=0.005, random_state=1, format="csr")
    before = psutil.Process().memory_info().rss
    s = _eigen.symmetrised([z[: n // 2], z[n // 2 :]])
    _lapack.sytrd_lower(s)
    grown = psutil.Process().memory_info().rss - before
    assert grown < 0.75 * 8 * n * n, grown / (8 * n * n)  # half, plus a page per column


def test_packed_reflectors_release_half_of_s(rng):
    """After dsytrd the Householder vectors are packed into the first half of S's buffer
    and the rest is given back to the system: the resident memory drops by ~n^2/2 x 8
    bytes, and the packed vectors still give LAPACK's eigenvectors."""
    import psutil

    n = 1500
    z = np.abs(rng.normal(size=(n, n))) * (rng.random((n, n)) < 0.01)
    np.fill_diagonal(z, 0.0)
    s = _eigen._dense_buffer(n)
    np.add(z, z.T, out=s)
    s *= 0.5
    ref = s.copy()
    from lswmkc_dask.core import lapack as _lapack

    d, e, tau = _lapack.sytrd_lower(s)
    full = s.copy(order="F")  # reflectors in place, to compare with the packed copy
    before = psutil.Process().memory_info().rss
    packed, offsets = _eigen._pack_reflectors(s)
    released = _eigen._release_tail(s, packed.size)
    after = psutil.Process().memory_info().rss
    assert packed.size == (n - 1) * (n - 2) // 2
    assert released >= 8 * n * n // 2 - 8192
    assert before - after >= 0.8 * released  # the pages really left the process
    for c in (0, 1, n // 2, n - 3):
        np.testing.assert_array_equal(packed[offsets[c] : offsets[c + 1]], full[c + 2 :, c])
    # Q T Q^T = S with Q from the packed vectors
    q = _eigen._apply_q(packed, offsets, tau, np.eye(n, order="F"))
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    np.testing.assert_allclose(q @ t @ q.T, ref, atol=1e-12)


def test_lapack_calls_release_the_gil(rng):
    """The tridiagonal reduction runs without the GIL: a Python thread keeps running
    during it (a Dask worker answers its heartbeats during a minutes-long step)."""
    import threading

    from lswmkc_dask.core import lapack as _lapack

    n = 2000
    a = np.asfortranarray(rng.normal(size=(n, n)))
    a += a.T
    ticks, done = [0], threading.Event()

    def count():
        while not done.is_set():
            ticks[0] += 1

    th = threading.Thread(target=count)
    th.start()
    try:
        start = ticks[0]
        t0 = time.perf_counter()
        _lapack.sytrd_lower(a)
        seconds = time.perf_counter() - t0
        during = ticks[0] - start
    finally:
        done.set()
        th.join()
    # A thread that gets the GIL at all counts ~10^6-10^7 per second; with the GIL held
    # for the whole call it would count (almost) nothing.
    assert during > 1000 * seconds, (during, seconds)


def test_fit_refuses_eigenvectors_that_do_not_fit(yale_store, monkeypatch):
    """The gathered step checks S plus the positive eigenvectors against the memory left
    before allocating them, and the fit stops at once with a MemoryError that says so
    (not retried, not a killed worker)."""
    from lswmkc_dask import LSWMKC

    n = yale_store.n_samples
    monkeypatch.setattr(_memory, "EIG_WORK_BYTES", 0)
    monkeypatch.setattr(_gathered, "_dense_s_bytes", lambda n: 0)  # S itself passes the check before it is built
    monkeypatch.setattr(_memory, "memory_left", lambda: 8 * n * n + 8 * n * 3)
    with pytest.raises(MemoryError, match=rf"positive eigenvalues at n = {n}: the packed reflectors of S .*--memory-limit"):
        LSWMKC(15, alpha=8.0, random_state=0).fit(yale_store)


@pytest.mark.parametrize("route, fallback", [("lanczos", True), ("subset", False), ("mrrr", False)])
def test_gathered_step_makes_room_for_the_route_that_builds_s(rng, monkeypatch, route, fallback):
    """The gathered step checks the room (nothing is spilled) for the route that runs:
    "lanczos" for its few vectors first, then, when it falls back to "mrrr", for the dense
    S before S is built; a dense route for its own S. Its K* is the dense one either way."""

    z = _low_rank_graph(rng, n=300, rank=120)
    if fallback:
        monkeypatch.setattr(_eigen, "LANCZOS_MAX_K", 0.05)
    asked = []
    monkeypatch.setattr(_memory, "make_room", lambda need: asked.append(need) or 10**12)
    blocks = [(sp.csr_matrix(z[:150]), (np.ones(3), 1.0, 1.0)), (sp.csr_matrix(z[150:]), (np.ones(3), 1.0, 1.0))]
    factor, part = _gathered.kstar_step(blocks, _gathered.StepSummary(np.ones(3), 1.0, 1.0, rank=10), route, 1)
    # a route other than "mrrr" is checked for its whole need; "mrrr" for its dense S (its eigenvectors
    # are checked once their number is known)
    need = [(_gathered._dense_s_bytes(300) if r == "mrrr" else _gathered._route_bytes(r, 300, 10)) + _memory.EIG_WORK_BYTES
            for r in ([route, "mrrr"] if fallback else [route])]
    assert asked == need
    assert part.driver == ("mrrr" if fallback else route) and part.rank == 120
    w_ref, _ = _eigen.psd_factor(z, driver="evd")
    np.testing.assert_allclose(factor @ factor.T, w_ref @ w_ref.T, rtol=0, atol=1e-10)


def test_change_of_kstar_in_the_gathered_step_equals_its_own_task_and_brute_force(rng):
    """With W_{t-1} given, the gathered step returns ||K*_t - K*_{t-1}||_F itself (kernels
    in memory); it equals the separate summary task's value and the dense difference."""

    z_prev, z = _low_rank_graph(rng, n=300, rank=40), _low_rank_graph(rng, n=300, rank=30)
    part0 = (np.ones(3), 1.0, 1.0)
    prev_factor, prev_part = _gathered.kstar_step([(sp.csr_matrix(z_prev), part0)], None, "mrrr", 1,
                                                with_change=True, prev_factor=None)
    assert np.isnan(prev_part.kstar_change)  # nothing to compare with at t = 1
    factor, fused = _gathered.kstar_step([(sp.csr_matrix(z), part0)], prev_part, "mrrr", 1,
                                       with_change=True, prev_factor=prev_factor)
    same, part = _gathered.kstar_step([(sp.csr_matrix(z), part0)], prev_part, "mrrr", 1)
    assert part.kstar_change is None and np.array_equal(same, factor)
    separate = _gathered.kstar_summary(part, factor, prev_factor, prev_part, 1)
    brute = np.linalg.norm(factor @ factor.T - prev_factor @ prev_factor.T)
    assert fused.kstar_change == pytest.approx(separate.kstar_change, rel=1e-12)
    assert fused.kstar_change == pytest.approx(brute, rel=1e-9)
