"""What every command module of the command line shares: its usage error and the
table of sub-commands."""

from __future__ import annotations

import argparse
from typing import Any

from .._params import DEFAULTS, ROWS

__all__ = ["ENTRY_OF", "RANDOM_STATE", "CLIError", "grid_params", "subcommands", "table_params"]

#: The default of --random-state; the Python API's default too (the parameter table).
RANDOM_STATE = DEFAULTS["random_state"]


#: The Python entry point whose parameters each command sets (the parameter table's
#: ``python`` column): its constraints check the command's options.
ENTRY_OF = {"prepare": "LSWMKC", "fit": "LSWMKC", "sweep": "sweep", "compare": "compare"}


class CLIError(Exception):
    """A usage problem found by the command line itself: printed as one line, exit 2."""


def subcommands(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """{name: sub-parser} of ``lswmkc``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The parser of :func:`lswmkc_dask.cli.build_parser`.

    Returns
    -------
    dict of str to argparse.ArgumentParser
        The sub-parser of each command, in the order of ``lswmkc --help``.
    """
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def table_params(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The parameters a command's options set, by their Python names (the parameter table).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``command``.
    command : str
        prepare, fit, sweep or compare.

    Returns
    -------
    dict of str to object
        ``{name: value}`` of every row that the command's entry point (:data:`ENTRY_OF`)
        takes and the command has a flag for; a grid flag of the command (``--alphas``)
        is left out: it is not the entry point's single value.
    """
    entry = ENTRY_OF[command]
    return {r.name: getattr(args, r.name) for r in ROWS
            if entry in r.python and command in r.commands and hasattr(args, r.name)}


def grid_params(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The grids a grid command's options set, by the Python names of ``sweep``/``compare``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``command``.
    command : str
        sweep or compare.

    Returns
    -------
    dict of str to list
        ``{keyword: values}`` of every grid flag of the command that was given or has a
        default of its own (``--alphas`` -> ``alphas``); a grid without either is left to
        the Python function's default (the alphas 2^0 .. 2^10).
    """
    out = {}
    for r in ROWS:
        if r.grid is not None and command in r.grid.commands:
            value = getattr(args, r.grid.flag.lstrip("-").replace("-", "_"))
            if value is not None:
                out[r.grid.python] = value
    return out
