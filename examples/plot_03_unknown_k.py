"""
When k is unknown
=================

Give a k grid and the sweep chooses k too, without labels. A k grid costs one fit per
alpha, not one per (alpha, k): the iterations do not depend on k, so each fit is
clustered at every k. A k is reported only where two signals agree within 1 (the
silhouette on the average kernel and prediction strength) and the k is not at an edge
of the grid; otherwise the sweep says "k not determined" and asks for k. Trust the
chosen alpha more than the chosen k.

The data here are made in the script: 4 groups of 40 samples seen in 3 noisy feature
views, turned into Gaussian kernels (``kernel="rbf"``).
"""

# %%
# Three views of four groups
# --------------------------
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from lswmkc_dask import evaluate, selected_model, sweep

rng = np.random.default_rng(0)
centres = rng.normal(scale=4.0, size=(4, 5))
truth = np.repeat(np.arange(4), 40)
views = [centres[truth] @ rng.normal(size=(5, d)) + rng.normal(scale=noise, size=(truth.size, d))
         for d, noise in ((8, 1.5), (12, 2.5), (6, 3.0))]
print([v.shape for v in views])

# %%
# Sweep alpha and k
# -----------------
# No labels are given: the choice sees only the views.
tmp = tempfile.TemporaryDirectory()
result = sweep(views, f"{tmp.name}/sweep", kernel="rbf", n_clusters=[2, 3, 4, 5, 6, 7],
               alphas=[1, 16, 256], n_init=10, progress=False)
choice = result["selected"]
print(choice["k_how"])
print("best score at each k:", {k: round(s, 4) for k, s in choice["n_clusters_scores"].items()})
print("prediction strength at each k:", {k: round(s, 2) for k, s in choice["k_choice"]["strengths"].items()})

# %%
# The two signals against k
# -------------------------
ks = [int(k) for k in choice["n_clusters_scores"]]
fig, ax1 = plt.subplots(figsize=(5.5, 3.2))
ax1.plot(ks, list(choice["n_clusters_scores"].values()), "o-", label="silhouette (best over alpha)")
ax1.set(xlabel="k", ylabel="silhouette on the average kernel")
ax2 = ax1.twinx()
ax2.plot(ks, list(choice["k_choice"]["strengths"].values()), "s--", color="C1", label="prediction strength")
ax2.axhline(choice["k_choice"]["threshold"], color="C1", lw=0.8, ls=":")
ax2.set(ylabel="prediction strength")
fig.legend(loc="lower left", bbox_to_anchor=(0.12, 0.18), fontsize="small")
fig.tight_layout()

# %%
# Fit the choice, and check it against the truth
# ----------------------------------------------
# The labels were not used to choose; here they only check the result.
model = selected_model(result, kernel="rbf", n_init=10).fit(views)  # the sweep's kernel is given again
print(f"k = {model.n_clusters_}, alpha = {model.alpha:g}")
print(evaluate(truth, model.labels_))
tmp.cleanup()
