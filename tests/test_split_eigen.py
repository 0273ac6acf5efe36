"""The split eigen route (issue 51): S reduced to tridiagonal T on the device, T's eigenpairs
with eigenvalue > 0 on the host (dstemr), the back-transformation on the device; the
memory-lean exact positive factor of a resident fit. On NumPy its device part is the CPU
"mrrr" route's (LAPACK dsytrd and the blocked back-transformation): checked against
numpy.linalg.eigh on random S and on the S of real fits (YALE, Handwritten), bit for bit
against the CPU route, and its crossings counted on array-api-strict's device1."""

from __future__ import annotations

import numpy as np
import pytest

from lswmkc_dask.core import eigen as _eigen
from lswmkc_dask.engine import device_fit as df
from lswmkc_dask.engine import gpu
from lswmkc_dask.engine._memory import resident_bytes

pytestmark = pytest.mark.timeout(900)


def _link(name="numpy", transfers=None):
    xp, device = df.resident_namespace(name)
    return df.Link(xp, device, transfers)


def _reference(s):
    lam, u = np.linalg.eigh(s)
    keep = lam > 0
    return lam[keep], (u[:, keep] * np.sqrt(lam[keep])) @ (u[:, keep] * np.sqrt(lam[keep])).T


def _check(s, rtol=1e-10):
    lam_ref, k_ref = _reference(s)
    link = _link()
    w, lam = gpu.split_positive_factor(link.to_device(s.copy(), "S"), link)
    w, lam = np.asarray(w), np.asarray(lam)
    assert lam.shape == lam_ref.shape and np.all(np.diff(lam) >= 0) and np.all(lam > 0)
    scale = np.abs(np.linalg.eigvalsh(s)).max()
    np.testing.assert_allclose(lam, lam_ref, rtol=0, atol=rtol * scale)
    np.testing.assert_allclose(w @ w.T, k_ref, rtol=0, atol=rtol * scale)
    return w, lam


@pytest.mark.parametrize("n", [1, 2, 7, 300])
def test_split_route_equals_numpy_eigh_on_random_s(n, rng):
    a = rng.normal(size=(n, n))
    _check(np.ascontiguousarray((a + a.T) / 2))


def test_split_route_on_negative_and_rank_deficient_s(rng):
    link = _link()
    w, lam = gpu.split_positive_factor(link.to_device(-np.eye(20), "S"), link)
    assert np.asarray(w).shape == (20, 0) and np.asarray(lam).size == 0
    b = rng.normal(size=(50, 3))
    _check(np.ascontiguousarray(b @ b.T))  # rank 3: round-off eigenvalues around 0 dropped or tiny


def _fit_s(kernels, max_iter):
    """The S of the last iteration of a short resident fit (CPU numbers)."""
    res, _, z = df.fit_resident(kernels, 8.0, max_iter=max_iter, min_iter=max_iter)
    z = z.toarray()
    return np.ascontiguousarray((z + z.T) * 0.5)


def test_split_route_on_yale_s(yale_store):
    s = _fit_s(yale_store.read_rows(0, yale_store.n_samples), 3)
    _check(s)
    w_cpu, lam_cpu = _eigen.psd_factor(s, driver="mrrr")  # the CPU route: the same LAPACK calls, bit for bit
    link = _link()
    w, lam = gpu.split_positive_factor(link.to_device(s.copy(), "S"), link)
    np.testing.assert_array_equal(np.asarray(lam), lam_cpu)
    np.testing.assert_array_equal(np.asarray(w), w_cpu)


@pytest.mark.slow
def test_split_route_on_handwritten_s():
    from lswmkc_dask.datasets import load_handwritten
    from lswmkc_dask.kernels.features import FeatureKernels, feature_kernels_on

    views, _ = load_handwritten()
    kernels = feature_kernels_on(FeatureKernels(views), _link())[0]
    _check(_fit_s(kernels, 2), rtol=1e-9)


def test_tridiagonal_positive_pairs_equal_brute_force(rng):
    from scipy.linalg import eigh_tridiagonal

    d, e = rng.normal(size=200), rng.normal(size=199)
    lam, u = _eigen.tridiagonal_positive_pairs(d, e)
    ref_lam, ref_u = eigh_tridiagonal(d, e, select="v", select_range=(0.0, np.inf), lapack_driver="stemr")
    np.testing.assert_allclose(lam, ref_lam, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.abs(u.T @ ref_u), np.eye(lam.size), atol=1e-8)
    assert u.flags.f_contiguous


class _HostBackend:
    """A stand-in for cuSOLVER on device1: sytrd/ormtr on the host, S's copy counted apart."""

    def __init__(self, link):
        self.link, self.cpu = link, gpu._LapackSplit()

    def reduce(self, s):
        host = np.ascontiguousarray(self.link.to_host(s, "backend"))
        reflectors, d, e, tau = self.cpu.reduce(host)
        return reflectors, self.link.to_device(d, "backend"), self.link.to_device(e, "backend"), tau

    def apply_q(self, reflectors, tau, u):
        return self.link.to_device(self.cpu.apply_q(reflectors, tau, self.link.to_host(u, "backend")), "backend")


def test_split_route_crossings_on_device1(monkeypatch, rng):
    """What the split route itself moves: T's two diagonals to the host (2n - 1 numbers), its r
    positive eigenvectors and eigenvalues to the device; S never (the stand-in's own copies
    are recorded apart). A namespace without sytrd/ormtr is refused by name."""
    a = rng.normal(size=(60, 60))
    s = (a + a.T) / 2
    link = _link("array-api-strict", df.Transfers())
    with pytest.raises(gpu.DeviceUnavailableError, match="no sytrd/ormtr on array_api_strict"):
        gpu.split_positive_factor(link.to_device(s, "S"), link)
    monkeypatch.setattr(gpu, "_TEST_SPLIT_BACKEND", _HostBackend(link))
    link.transfers.log.clear()
    w, lam = gpu.split_positive_factor(link.to_device(s, "S"), link)
    r = int(lam.shape[0])
    own = [(d, what, b) for _, d, what, b in link.transfers.log if what not in ("backend", "S")]
    assert own == [("to_host", "tridiagonal", 8 * 60), ("to_host", "tridiagonal", 8 * 59),
                   ("to_device", "tridiagonal eigenvectors", 8 * 60 * r), ("to_device", "eigenvalues", 8 * r)]
    lam_ref, k_ref = _reference(s)
    wh = link.to_host(w, "test")
    np.testing.assert_allclose(wh @ wh.T, k_ref, rtol=0, atol=1e-10 * np.abs(lam_ref).max())


@pytest.mark.parametrize("name", ["numpy", "array-api-strict"])
def test_resident_fit_with_the_split_route_equals_syevd(name, yale_store, monkeypatch):
    n = yale_store.n_samples
    link = _link(name)
    if name == "array-api-strict":
        monkeypatch.setattr(gpu, "_TEST_SPLIT_BACKEND", _HostBackend(link))
    kernels = link.to_device(yale_store.read_rows(0, n), "kernels")
    record = {}
    ref, _, _ = df.fit_resident(kernels, 8.0)
    got, _, _ = df.fit_resident(kernels, 8.0, eigen="split", record=record)
    assert record["eigen"] == "split" and got.n_iter == ref.n_iter
    np.testing.assert_allclose(got.weights, ref.weights, rtol=0, atol=1e-10)
    np.testing.assert_allclose(got.factor @ got.factor.T, ref.factor @ ref.factor.T, rtol=0, atol=1e-9)


def test_memory_counts_know_each_route():
    """syevd: S, its 4 n^2 workspace, W_{t-1}; split: S, the positive eigenvectors (r counted as
    n), W_{t-1} and sytrd/ormtr's workspace; at n = 60,000 the split route needs about half."""
    n, m, b = 60_000, 6, 400
    assert gpu.device_bytes(n, route="split") == 8 * 2 * n * n + 8 * (gpu.SPLIT_WORK_COLUMNS + 3) * n
    assert gpu.device_bytes(n, route="split", rank_fraction=0.5) == 8 * (n * n + n * n // 2) + 8 * 515 * n
    syevd = resident_bytes(m, n, b, 4, stack="host")
    split = resident_bytes(m, n, b, 4, stack="host", eigen="split")
    assert syevd - split == 8 * 3 * n * n - 8 * 515 * n
    with pytest.raises(ValueError, match="route must be one of"):
        gpu.device_bytes(n, route="magma")
    with pytest.raises(ValueError, match="eigen must be one of"):
        resident_bytes(m, n, b, eigen="magma")


@pytest.mark.gpu
def test_gpu_split_route_equals_syevd():
    if not gpu.cuda_device()[0]:
        pytest.skip("no CUDA device (or CuPy) here")
    xp, device = df.resident_namespace("cuda")
    link = df.Link(xp, device)
    rng = np.random.default_rng(0)
    for n in (1, 50, 3000):
        a = rng.normal(size=(n, n))
        s = np.ascontiguousarray((a + a.T) / 2)
        lam_ref, k_ref = _reference(s)
        w, lam = gpu.split_positive_factor(link.to_device(s, "S"), link)
        wh = link.to_host(w, "W")
        np.testing.assert_allclose(link.to_host(lam, "lam"), lam_ref, rtol=0, atol=1e-10 * np.abs(lam_ref).max())
        np.testing.assert_allclose(wh @ wh.T, k_ref, rtol=0, atol=1e-10 * np.abs(lam_ref).max())
