"""
A fit and its figures
=====================

One LSWMKC fit on the YALE kernels shipped with the package (165 face images of 15
people, 5 base kernels), then what it learned: the objective per iteration, the weight
of each base kernel and the affinity graph Z ordered by class, where a good fit shows
15 blocks on the diagonal. ``lswmkc plot`` draws the same figures from a fit directory;
the last cell shows one of them.
"""

# %%
# Fit
# ---
# ``n_init=10`` k-means starts instead of the default 50 keep this example quick.
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from lswmkc_dask import LSWMKC, evaluate
from lswmkc_dask.datasets import load_yale

kernels, labels = load_yale()  # (5, 165, 165), (165,)
model = LSWMKC(n_clusters=15, alpha=8, n_init=10).fit(kernels)
print(f"{model.n_iter_} iterations, converged: {model.converged_}")
print("kernel weights", np.round(model.kernel_weights_, 4))
print(evaluate(labels, model.labels_))

# %%
# Convergence and kernel weights
# ------------------------------
# The objective of Eq. (10) per iteration, and the learned weight omega_p of each base
# kernel (Eq. 12).
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2))
ax1.plot(np.arange(1, model.n_iter_ + 1), model.objective_, marker="o", ms=3)
ax1.set(xlabel="iteration", ylabel="objective (Eq. 10)", title="convergence")
ax2.bar(range(len(model.kernel_weights_)), model.kernel_weights_)
ax2.set(xlabel="base kernel", ylabel="weight omega", title="kernel weights")
fig.tight_layout()

# %%
# The affinity graph Z, ordered by class
# --------------------------------------
# ``affinity_`` is sparse (each row on the simplex); ordering the samples by their
# class shows how well Z separates the 15 people.
order = np.argsort(labels, kind="stable")
Z = model.affinity_.toarray()[np.ix_(order, order)]
fig, ax = plt.subplots(figsize=(4.2, 4))
image = ax.imshow(Z, cmap="viridis", vmax=np.quantile(Z[Z > 0], 0.95))
ax.set(title="Z, samples ordered by class", xticks=[], yticks=[])
_ = fig.colorbar(image, ax=ax, shrink=0.8)

# %%
# The package's own figures
# -------------------------
# ``lswmkc fit --output DIR`` writes a fit directory (report.json, labels.csv, Z, the
# factor of K*, the model); :func:`lswmkc_dask.plots.plot_fit` (``lswmkc plot DIR``)
# draws its figures as PNG files.
from lswmkc_dask.cli import main
from lswmkc_dask.plots import plot_fit

with tempfile.TemporaryDirectory() as tmp:
    main(["fit", "--dataset", "yale", "--alpha", "8", "--n-init", "10", "--quiet", "--output", f"{tmp}/fit"])
    pngs = plot_fit(f"{tmp}/fit")
    print([p.name for p in pngs])
    heatmap = next(p for p in pngs if p.name == "kstar_heatmap.png")
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.imshow(plt.imread(heatmap))
    ax.set_axis_off()
