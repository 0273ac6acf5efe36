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

Errors print one line, ``lswmkc: error: ...``, naming command-line flags (``--overwrite``)
rather than the Python keywords of the library (``overwrite=True``), and exit with 2. An
unknown flag is answered with the closest known one (``--alpah``: did you mean
``--alpha``?). ``--kernel`` takes the Python API's names (rbf, linear, poly) and their
aliases (gaussian, polynomial).

The options that set a parameter (``--alpha``, ``--max-iter``, ``--eig-driver``, ...; also
``--quiet``, which sets ``verbose=0``, ``--degree``, ``--dtype``, ``--methods``, ``--taus``
and where to run: ``--scheduler``, ``--n-workers``, TLS) and their help and defaults come
from the parameter table (:mod:`lswmkc_dask._params`, docs/parameters.md), the Python API's
defaults; ``--snapshots`` is also spelled ``--snapshot-iterations``, the Python name. A
command checks its options once, before any input is read, against the table's
constraints (as the Python entry points do), and calls the library with the keywords the
table maps them to.

One module per job: :mod:`~lswmkc_dask.cli.parser` composes the parser of each command's
module (``fit``, ``grids``, ``predict``, ``outputs``) and spells the flags in messages,
:mod:`~lswmkc_dask.cli.inputs` holds the options and the reading they share,
:mod:`~lswmkc_dask.cli.validate` the checks before any input is read and
:mod:`~lswmkc_dask.cli.entry` the entry point with its exit statuses.
"""

from __future__ import annotations

from ._base import RANDOM_STATE, CLIError
from ._base import subcommands as _subcommands  # noqa: F401 - the name the one-module command line had
from .entry import main
from .inputs import view_names as _view_names  # noqa: F401 - likewise
from .parser import build_parser, cli_message, flag_table
from .parser import show_warning as _show_warning  # noqa: F401 - likewise

__all__ = ["RANDOM_STATE", "CLIError", "build_parser", "cli_message", "flag_table", "main"]
