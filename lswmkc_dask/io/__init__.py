"""Input and output: kernel and feature readers, labels, the zarr kernel store, atomic writes.

* :mod:`.readers` - ``.mat`` (v5, v7.3), ``.npz`` kernels; CSV/NPY/NPZ feature views;
* :mod:`.labels` - label validation;
* :mod:`.store` - :func:`prepare` (kernels -> chunked zarr store) and :func:`open_store`;
* :mod:`.integrity` - chunk checksums, the chunk manifest, the checks at open and at
  every read, :func:`verify_store`;
* :mod:`.atomic` - outputs written under a temporary name and renamed when complete;
  :mod:`.ownership` - the marker and signatures that make an output lswmkc's;
  :mod:`.guards` - where an output may be written and what it may replace;
* :mod:`.model_file` - a fitted model in a portable, pickle-free safetensors file
  (``LSWMKC.save``/``LSWMKC.load``);
* :mod:`.npz` - a fit directory's ``.npz``/``.npy`` files (Z, W, snapshots) read from
  untrusted sources in bounded memory and time;
* :mod:`.results` - the JSON and label files of a fit or sweep directory, read back
  through the same guard (regular files only, content checked, the file named).
"""

from ..kernels.features import ArrayKernelSource, KernelStats, default_block_rows, scan_kernels
from .atomic import atomic_path
from .integrity import verify_store
from .labels import check_labels, count_classes, read_labels
from .readers import (
    H5KernelSource,
    load_features,
    load_kernels,
    open_kernel_file,
    readable_file,
)
from .store import (
    STORE_FORMAT,
    KernelStore,
    StoreUnreadableError,
    open_store,
    prepare,
    read_store_rows,
)

__all__ = [
    "STORE_FORMAT",
    "ArrayKernelSource",
    "H5KernelSource",
    "KernelStats",
    "KernelStore",
    "StoreUnreadableError",
    "atomic_path",
    "check_labels",
    "count_classes",
    "default_block_rows",
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
