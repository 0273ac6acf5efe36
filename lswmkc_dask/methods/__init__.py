"""The methods LSWMKC's paper compares with (its Table I), on precomputed base kernels.

Each is a scikit-learn style estimator (``fit``, ``fit_predict``, ``labels_``,
``kernel_weights_``, ``objective_``, ``n_iter_``) written from its own paper's equations and
checked against its authors' code; all end with the same final clustering as LSWMKC
(:class:`MultipleKernelClustering`). :func:`get_method` finds one by the name
``lswmkc compare --methods`` takes.
"""

from __future__ import annotations

from importlib import import_module

from ._base import MultipleKernelClustering, Solution
from ._cagl import CAGL
from ._late_fusion import LFMVC, OPLFMVC
from ._lkam import LKAM
from ._lmkkm import LMKKM
from ._mkkm import MKKM
from ._mkkm_mr import MKKMMR
from ._onkc import ONKC
from ._simple_mkkm import LocalizedSimpleMKKM, SimpleMKKM
from ._spmkc import SPMKC
from ._swmc import SwMC

#: name -> (module, class) of every compared method, in the paper's order.
METHODS: dict[str, tuple[str, str]] = {
    "mkkm": ("mkkm", "MKKM"),
    "lmkkm": ("lmkkm", "LMKKM"),
    "mkkm-mr": ("mkkm_mr", "MKKMMR"),
    "lkam": ("lkam", "LKAM"),
    "onkc": ("onkc", "ONKC"),
    "swmc": ("swmc", "SwMC"),
    "lf-mvc": ("late_fusion", "LFMVC"),
    "spmkc": ("spmkc", "SPMKC"),
    "smkkm": ("simple_mkkm", "SimpleMKKM"),
    "cagl": ("cagl", "CAGL"),
    "oplfmvc": ("late_fusion", "OPLFMVC"),
    "lsmkkm": ("simple_mkkm", "LocalizedSimpleMKKM"),
}

__all__ = ["CAGL", "LFMVC", "LKAM", "LMKKM", "METHODS", "MKKM", "MKKMMR", "OPLFMVC", "ONKC", "SPMKC",
           "LocalizedSimpleMKKM", "MultipleKernelClustering", "SimpleMKKM", "Solution", "SwMC", "available_methods",
           "get_method"]


def get_method(name: str) -> type[MultipleKernelClustering]:
    """The estimator class of a compared method.

    Parameters
    ----------
    name : str
        A key of :data:`METHODS` (``"mkkm"``, ``"smkkm"``, ...), case-insensitive.

    Returns
    -------
    type
        A subclass of :class:`MultipleKernelClustering`.

    Raises
    ------
    ValueError
        An unknown name (the message lists the known ones), or a method not available in this version.
    """
    key = name.lower()
    if key not in METHODS:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    module, cls = METHODS[key]
    try:
        return getattr(import_module(f"{__name__}._{module}"), cls)
    except (ModuleNotFoundError, AttributeError) as exc:
        raise ValueError(f"method {name!r} is not available in this version") from exc


def available_methods() -> list[str]:
    """Names of :data:`METHODS` whose module is present, in the paper's order."""
    out = []
    for name in METHODS:
        try:
            get_method(name)
        except ValueError:
            continue
        out.append(name)
    return out
