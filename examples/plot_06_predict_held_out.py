"""
New samples: ``predict`` on a held-out split
============================================

A fitted model labels samples it was not fitted on: :meth:`lswmkc_dask.LSWMKC.predict`
builds each new sample's kernel rows against the training samples with the training
statistics (the features' means and scales, the kernels' bandwidths and centring),
combines them with the learned kernel weights into the sample's row of the affinity
graph, and gives it the cluster that row weighs most (each training sample votes for its
cluster with its affinity). Here: 400 of the Handwritten digits (6 feature
views), fitted on 300 and predicted on the other 100.
"""

# %%
# A stratified split of the Handwritten digits
# --------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from lswmkc_dask import LSWMKC, evaluate
from lswmkc_dask.datasets import load_handwritten

views, digits = load_handwritten()  # 6 views of 2000 digits, 200 of each
rng = np.random.default_rng(0)
picked = np.concatenate([rng.choice(np.flatnonzero(digits == d), 40, replace=False) for d in range(10)])
rng.shuffle(picked)
train, test = picked[:300], picked[300:]
print(f"{train.size} training samples, {test.size} held out; views {[v.shape[1] for v in views]}")

# %%
# Fit on the training split
# -------------------------
model = LSWMKC(n_clusters=10, alpha=64, kernel="rbf", n_init=10).fit([v[train] for v in views])
print(f"{model.n_iter_} iterations; kernel weights {model.kernel_weights_.round(3)}")
print("training samples:", evaluate(digits[train], model.labels_))

# %%
# Predict the held-out samples
# ----------------------------
# ``evaluate`` matches clusters to classes (the Hungarian assignment), so the held-out
# ACC is comparable with the training one.
predicted = model.predict([v[test] for v in views])
print("held-out samples:", evaluate(digits[test], predicted))

# %%
# Where the held-out samples land
# -------------------------------
# Rows: true digit; columns: predicted cluster, ordered to match the digits.
from scipy.optimize import linear_sum_assignment

counts = np.zeros((10, 10), dtype=int)
np.add.at(counts, (digits[test], predicted), 1)
_, columns = linear_sum_assignment(-counts)
fig, ax = plt.subplots(figsize=(4.4, 4))
ax.imshow(counts[:, columns], cmap="Blues")
for (i, j), c in np.ndenumerate(counts[:, columns]):
    if c:
        ax.text(j, i, c, ha="center", va="center", fontsize=8)
ax.set(xlabel="predicted cluster (matched)", ylabel="true digit", title="held-out digits",
       xticks=range(10), yticks=range(10))
fig.tight_layout()
