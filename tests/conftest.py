"""Shared fixtures: real LocalClusters (loopback), the YALE data and its reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lswmkc_dask import prepare
from lswmkc_dask.cluster import local_cluster
from lswmkc_dask.datasets import load_yale

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def reference():
    """Outputs of the authors' MATLAB code under Octave on YALE (tests/data)."""
    return json.loads((DATA / "yale_octave_reference.json").read_text())


@pytest.fixture(scope="session")
def yale():
    return load_yale()


@pytest.fixture(scope="session")
def yale_store(yale):
    kernels, labels = yale
    return prepare(kernels, None, labels=labels)


@pytest.fixture(scope="session")
def client():
    """A real LocalCluster with 2 single-threaded worker processes on 127.0.0.1."""
    with local_cluster(n_workers=2) as c:
        yield c


@pytest.fixture(scope="session")
def client1():
    """A real LocalCluster with 1 worker process."""
    with local_cluster(n_workers=1) as c:
        yield c


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
