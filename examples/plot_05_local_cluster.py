"""
A fit on a Dask LocalCluster
============================

Without a client a fit runs in your process. With a Dask client active (a
``LocalCluster`` here; on a real cluster ``Client("tcp://scheduler:8786")``,
dask-jobqueue or a scheduler file) it runs on that cluster's workers, as every
Dask-aware library does: the row blocks of every iteration on the workers, the
eigendecomposition and the final k-means as tasks on one worker. The kernels are read
from a chunked zarr store that every worker can read.
"""

# %%
# A kernel store on disk
# ----------------------
# :func:`lswmkc_dask.prepare` preprocesses the kernels (symmetrise, centre, normalise)
# into a store chunked by rows, 64 rows per chunk here.
import tempfile

from distributed import Client, LocalCluster

from lswmkc_dask import LSWMKC, evaluate, prepare
from lswmkc_dask.datasets import load_yale

kernels, labels = load_yale()
tmp = tempfile.TemporaryDirectory()
store = prepare(kernels, f"{tmp.name}/yale.zarr", labels=labels, block_rows=64)
print(store)

# %%
# Two workers, one thread each
# ----------------------------
# The workers here are threads of this process (``processes=False``), so the script runs
# as it is. Worker processes (``processes=True``, the default) start a new interpreter
# each, which imports your script again: in a script, that cluster belongs under
# ``if __name__ == "__main__":`` (Dask's rule); a notebook needs no guard.
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
client = Client(cluster)
model = LSWMKC(n_clusters=15, alpha=8, n_init=10).fit(f"{tmp.name}/yale.zarr")  # runs on `client`
print(model.execution_)
print(f"{model.n_iter_} iterations; weights {model.kernel_weights_.round(4)}")
print(evaluate(store.labels, model.labels_))

# %%
# The same fit in this process
# ----------------------------
# Once the client is closed, no client is active and the fit runs in this process. The
# two fits agree.
client.close()
cluster.close()
local = LSWMKC(n_clusters=15, alpha=8, n_init=10).fit(f"{tmp.name}/yale.zarr")
print(local.execution_)
print("same kernel weights:", abs(local.kernel_weights_ - model.kernel_weights_).max() < 1e-10)
print("same labels:", (local.labels_ == model.labels_).all())
tmp.cleanup()
