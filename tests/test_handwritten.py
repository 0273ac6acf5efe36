"""Handwritten (UCI Multiple Features), n = 2000, m = 6: the paper's accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from lswmkc_dask import LSWMKC, prepare
from lswmkc_dask.datasets import load_dataset


@pytest.mark.slow
def test_handwritten_alpha_64(client, tmp_path):
    kernels, labels = load_dataset("handwritten")
    store = prepare(kernels, tmp_path / "hw.zarr", labels=labels)
    assert store.n_samples == 2000 and store.n_kernels == 6 and store.block_rows < 2000
    model = LSWMKC(10, alpha=64, client=client, random_state=0).fit(store)
    paper = model.evaluate(labels, protocol="paper")
    assert paper["ACC"] >= 0.96
    assert model.evaluate(labels)["ACC"] >= 0.9
    assert np.all(np.diff(model.objective_) <= 1e-9 * np.abs(model.objective_[:-1]))
    assert model.kernel_weights_.shape == (6,) and np.all(model.kernel_weights_ > 0)
