"""What every command module of the command line shares: its usage error and the
table of sub-commands."""

from __future__ import annotations

import argparse
from typing import Any

from .._params import DEFAULTS

__all__ = ["RANDOM_STATE", "CLIError", "subcommands"]

#: The default of --random-state; the Python API's default too (the parameter table).
RANDOM_STATE = DEFAULTS["random_state"]


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
