"""The ``lswmkc`` command line.

::

    lswmkc prepare INPUT OUTPUT.zarr [--block-rows N]          # kernel file -> store
    lswmkc prepare --features a.csv b.csv OUTPUT.zarr            # OUTPUT is the last path
    lswmkc prepare --features a.csv b.csv --output OUTPUT.zarr   # the same, explicitly
    lswmkc fit --dataset yale --alpha 8                          # shipped data
    lswmkc fit STORE.zarr|KERNELS.mat --n-clusters K --alpha A [--scheduler ADDR] [--output DIR]
    lswmkc sweep STORE.zarr --alphas 1 8 64 --output DIR
    lswmkc compare --dataset yale --output DIR                   # LSWMKC vs Avg-KKM, MKKM, KNN; resumable
    lswmkc predict DIR (--features a.csv b.csv | KERNELS.npz) --output labels.csv   # new samples, a fit's model
    lswmkc plot DIR [--output PNG_DIR] [--alpha A] [--n-clusters K]   # default: the selected (alpha, k)
    lswmkc verify STORE.zarr                                     # every chunk checked; exit 2 if damaged
    lswmkc table DIR [--format latex|markdown]                   # the metrics table of a sweep or compare directory

Errors print one line, ``lswmkc: error: ...``, naming flags (``--overwrite``) rather
than Python keywords, and exit with 2. The options that set a parameter, their help and
defaults come from the parameter table (:mod:`lswmkc_dask._params`, docs/parameters.md).
"""

from __future__ import annotations

from ..errors import CLIError
from ._base import RANDOM_STATE
from ._base import subcommands as _subcommands  # noqa: F401 - the name the tests import
from ._entry import main
from ._inputs import view_names as _view_names  # noqa: F401 - likewise
from ._parser import build_parser, cli_message, flag_table
from ._parser import show_warning as _show_warning  # noqa: F401 - likewise

__all__ = ["RANDOM_STATE", "CLIError", "build_parser", "cli_message", "flag_table", "main"]
