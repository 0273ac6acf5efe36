"""Input and output: kernel and feature readers, labels, the zarr kernel store, atomic writes.

:mod:`._readers` (kernel files, feature views), :mod:`.labels`, :mod:`.store` (:func:`prepare`,
:func:`open_store`) and :mod:`.integrity` (its checksums, manifest and checks, :func:`verify_store`);
:mod:`.output` (every output: where it may go, what it may replace, written under a temporary
name; the run directory's lock) and :mod:`.run` (a sweep's or comparison's directory);
:mod:`.model_file` (``LSWMKC.save``/``load``, safetensors),
:mod:`.npz` and :mod:`.results` (a fit directory's files read back from untrusted sources).
"""

from ..kernels.features import ArrayKernelSource, KernelStats, default_block_rows, scan_kernels
from ._readers import (
    H5KernelSource,
    HeaderedView,
    load_features,
    load_kernels,
    open_kernel_file,
    readable_file,
)
from .integrity import verify_store
from .labels import check_labels, count_classes, read_labels
from .output import atomic_path
from .store import (
    STORE_FORMAT,
    ArrayStack,
    KernelStore,
    StoreUnreadableError,
    open_store,
    prepare,
    read_store_rows,
)

__all__ = [
    "STORE_FORMAT",
    "ArrayKernelSource",
    "ArrayStack",
    "H5KernelSource",
    "KernelStats",
    "KernelStore",
    "StoreUnreadableError",
    "atomic_path",
    "check_labels",
    "count_classes",
    "default_block_rows",
    "HeaderedView",
    "load_features",
    "load_kernels",
    "open_kernel_file",
    "open_store",
    "prepare",
    "read_labels",
    "read_store_rows",
    "readable_file",
    "scan_kernels",
    "verify_store",
]
