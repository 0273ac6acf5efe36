"""
A sweep and the label-free choice
=================================

The paper chooses alpha by the best accuracy against the labels. Clustering data rarely
have labels: :func:`lswmkc_dask.sweep` scores every grid point without them (the
silhouette of its partition on the average kernel), marks the near-ties (the points
within one standard error of the best) and says how sure it is. With labels given, the
summary also shows how far the choice is from the grid's best, as a check.
"""

# %%
# Sweep alpha on YALE
# -------------------
# Six alphas of the paper's grid 2^0..2^10 and ``n_init=10`` keep this example quick.
import tempfile

import matplotlib.pyplot as plt

from lswmkc_dask import selected_model, sweep
from lswmkc_dask.datasets import load_yale

kernels, labels = load_yale()
tmp = tempfile.TemporaryDirectory()
result = sweep(kernels, f"{tmp.name}/sweep", labels=labels, alphas=[1, 4, 16, 64, 256, 1024],
               n_init=10, progress=False)
choice = result["selected"]
print(f"selected without labels: alpha={choice['alpha']:g}, score {choice['score']:.4f} "
      f"({choice['confidence']})")
print("near-ties:", [f"alpha={t['alpha']:g}" for t in choice["near_ties"]])
print("the other scores' votes:", {name: f"alpha={v['alpha']:g}" for name, v in choice["votes"].items()})
print(f"honest ACC of the choice {choice['ACC_honest']:.4f}, "
      f"{choice['regret_honest_ACC_points']:.2f} points below the grid's best")

# %%
# The score and the accuracy against alpha
# ----------------------------------------
# The label-free score (left) chooses; the accuracy (right, from the labels) is what
# it could not see. Near-ties are ringed.
alphas = [s["alpha"] for s in choice["scores"]]
scores = [s["score"] for s in choice["scores"]]
rows = sorted(result["rows"], key=lambda r: r["alpha"])
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2))
ax1.semilogx(alphas, scores, "o-", base=2)
ties = [t["alpha"] for t in choice["near_ties"]]
ax1.semilogx(ties, [s for a, s in zip(alphas, scores) if a in ties], "o", mfc="none", ms=12, base=2)
ax1.axvline(choice["alpha"], color="grey", ls=":")
ax1.set(xlabel="alpha", ylabel="silhouette on the average kernel", title="label-free score")
ax2.semilogx([r["alpha"] for r in rows], [r["ACC_honest"] for r in rows], "s-", base=2)
ax2.axvline(choice["alpha"], color="grey", ls=":")
ax2.set(xlabel="alpha", ylabel="ACC (honest)", title="accuracy against the labels")
fig.tight_layout()

# %%
# Fit the choice
# --------------
# :func:`lswmkc_dask.selected_model` gives an unfitted estimator with the chosen alpha,
# n_neighbors and k.
model = selected_model(result, n_init=10).fit(kernels)
print(model)
print(model.evaluate(labels))
tmp.cleanup()
