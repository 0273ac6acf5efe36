"""LSWMKC (Local Sample-weighted Multiple Kernel Clustering) on Dask.

Li et al., "Local Sample-weighted Multiple Kernel Clustering with Consensus
Discriminative Graph", IEEE TNNLS. Base kernels live in a chunked zarr store; each
iteration reduces them blockwise on Dask workers.
"""

from . import _logging  # noqa: F401  (the package's NullHandler, attached at import)
from ._version import __version__
from .engine.fit import fit_blocks, fit_store
from .engine.where import Where
from .errors import ClusterWarning, DegenerateKernelWarning, DuplicateKernelWarning, HeaderWarning, KernelInputError
from .estimator import LSWMKC, lswmkc
from .grid.results import selected_model
from .grid.sweep import sweep
from .io import KernelStore, load_features, load_kernels, open_store, prepare
from .kernels.features import FeatureKernels, kernels_from_features, preprocess_kernels
from .records import FitOptions, LSWMKCResult
from .report.metrics import evaluate

__all__ = [
    "__version__",
    "LSWMKC",
    "LSWMKCResult",
    "FitOptions",
    "ClusterWarning",
    "DegenerateKernelWarning",
    "DuplicateKernelWarning",
    "FeatureKernels",
    "HeaderWarning",
    "KernelInputError",
    "KernelStore",
    "Where",
    "evaluate",
    "fit_blocks",
    "fit_store",
    "kernels_from_features",
    "load_features",
    "load_kernels",
    "lswmkc",
    "open_store",
    "prepare",
    "preprocess_kernels",
    "selected_model",
    "sweep",
]
