"""The argument parser of ``lswmkc``: one sub-parser per command, each built by its
command's module, and the handler of each command."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .._version import __version__
from .fit import add_fit, add_prepare, run_fit, run_prepare
from .grids import add_compare, add_sweep, run_compare, run_sweep
from .outputs import add_plot, add_table, add_verify, run_plot, run_table, run_verify
from .predict import add_predict, run_predict

__all__ = ["COMMANDS", "build_parser"]

#: Each command: (the builder of its sub-parser, its handler ``args -> exit status``), in
#: the order ``lswmkc --help`` lists them.
COMMANDS: dict[str, tuple[Callable[[Any], None], Callable[[argparse.Namespace], int]]] = {
    "prepare": (add_prepare, run_prepare),
    "fit": (add_fit, run_fit),
    "sweep": (add_sweep, run_sweep),
    "compare": (add_compare, run_compare),
    "predict": (add_predict, run_predict),
    "plot": (add_plot, run_plot),
    "table": (add_table, run_table),
    "verify": (add_verify, run_verify),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``lswmkc``: ``--version`` and the sub-commands of :data:`COMMANDS`.

    Returns
    -------
    argparse.ArgumentParser
        A new parser (``args.command`` names the command given).
    """
    parser = argparse.ArgumentParser(prog="lswmkc", description="LSWMKC multiple kernel clustering on Dask")
    parser.add_argument("--version", action="version", version=f"lswmkc {__version__}",
                        help="print the version of lswmkc-dask and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add, _run in COMMANDS.values():
        add(sub)
    return parser
