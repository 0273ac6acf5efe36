"""What every command module of the command line shares: its usage error, the table of
sub-commands, the options' Python names and the ``--output``/``--overwrite`` pair."""

from __future__ import annotations

import argparse
from typing import Any

from .._params import DEFAULTS, ROWS

#: The default of --random-state; the Python API's default too (the parameter table).
RANDOM_STATE = DEFAULTS["random_state"]

#: The Python entry point whose parameters (the table's ``python`` column) each command sets.
ENTRY_OF = {"prepare": "LSWMKC", "fit": "LSWMKC", "sweep": "sweep", "compare": "compare"}


def subcommands(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """{name: sub-parser} of ``lswmkc`` (:func:`lswmkc_dask.cli.build_parser`), in the order of ``--help``.

    Parameters
    ----------
    parser : argparse.ArgumentParser

    Returns
    -------
    dict of str to argparse.ArgumentParser
    """
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def add_output(p: Any, metavar: str, help: str, overwrite: str, required: bool = False) -> None:
    """Add ``--output METAVAR`` and ``--overwrite`` (a switch) with their help texts to ``p``.

    Parameters
    ----------
    p : argparse.ArgumentParser
    metavar, help : str
        ``--output``'s.
    overwrite : str
        ``--overwrite``'s help.
    required : bool
        Whether ``--output`` must be given.
    """
    p.add_argument("--output", metavar=metavar, required=required, help=help)
    p.add_argument("--overwrite", action="store_true", help=overwrite)


def table_params(args: argparse.Namespace, command: str, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """``{name: value}`` of every row the command's entry point (:data:`ENTRY_OF`) takes and
    the command has a flag for (a grid flag such as ``--alphas`` left out).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``command``.
    command : str
        prepare, fit, sweep or compare.
    exclude : tuple of str
        Rows left out (``kernel``: ``--features`` were built into precomputed kernels).

    Returns
    -------
    dict of str to object
    """
    entry = ENTRY_OF[command]
    return {r.name: getattr(args, r.name) for r in ROWS
            if entry in r.python and command in r.commands and hasattr(args, r.name) and r.name not in exclude}


def grid_params(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """``{keyword: values}`` of the grid flags of sweep or compare that were given or have a
    default of their own (``--alphas`` -> ``alphas``; else the Python function's default).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``command``.
    command : str
        sweep or compare.

    Returns
    -------
    dict of str to list
    """
    dests = {r.grid.python: r.grid.flag.lstrip("-").replace("-", "_") for r in ROWS
             if r.grid is not None and command in r.grid.commands}
    return {name: getattr(args, dest) for name, dest in dests.items() if getattr(args, dest) is not None}
