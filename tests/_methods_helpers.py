"""What the tests of the compared methods (tests/test_methods_*.py) share: the YALE kernels and the authors' outputs.

A test module takes the fixtures by assignment, so that pytest finds them there (an import
of a fixture's name would read as unused to the linter)::

    import _methods_helpers as helpers

    kernels, pre = helpers.kernels, helpers.pre
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lswmkc_dask import preprocess_kernels

#: The authors' outputs under Octave: ``<method>_yale.json`` (and start matrices, ``*_init.npz``).
COMPETITORS = Path(__file__).parent / "data" / "competitors"


def reference(name: str) -> dict[str, Any]:
    """The authors' outputs on YALE for a method, ``tests/data/competitors/<name>_yale.json``."""
    return json.loads((COMPETITORS / f"{name}_yale.json").read_text())


def init_matrices(name: str) -> np.lib.npyio.NpzFile:
    """The start matrices of the authors' run, ``tests/data/competitors/<name>_yale_init.npz``."""
    return np.load(COMPETITORS / f"{name}_yale_init.npz")


@pytest.fixture(scope="module")
def kernels(yale):
    """YALE's five raw base kernels (5, 165, 165), from the session's ``yale`` (tests/conftest.py)."""
    return yale[0]


@pytest.fixture(scope="module")
def pre(kernels):
    """YALE's base kernels preprocessed as every method's ``fit`` does (``kcenter``, ``knorm``)."""
    return preprocess_kernels(kernels)


def relative_error(a: Any, b: Any) -> float:
    """``max |a - b| / max |b|``: the largest difference relative to the reference ``b``'s scale."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
