"""The argument parser of ``lswmkc`` (one sub-parser per command, built by its module),
each command's handler, and the library's messages with their parameters spelled as flags."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

from .._version import __version__
from ..errors import render_message
from ._base import subcommands
from ._fit import add_fit, add_prepare, run_fit, run_prepare
from ._grids import add_compare, add_sweep, run_compare, run_sweep
from ._outputs import add_plot, add_table, add_verify, run_plot, run_table, run_verify
from ._predict import add_predict, run_predict

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


class _Parser(argparse.ArgumentParser):
    """No abbreviated flags (``--n-cluster`` is not ``--n-clusters``), and an error is one line,
    without the command's usage of some 18 lines above it (``-h`` shows that)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``lswmkc``: ``--version`` and the sub-commands of :data:`COMMANDS`.

    Returns
    -------
    argparse.ArgumentParser
        A new parser (``args.command`` names the command given).
    """
    parser = _Parser(prog="lswmkc", description="LSWMKC multiple kernel clustering on Dask")
    parser.add_argument("--version", action="version", version=f"lswmkc {__version__}",
                        help="print the version of lswmkc-dask and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for add, _run in COMMANDS.values():
        add(sub)
    return parser


@functools.lru_cache(maxsize=1)
def flag_table() -> dict[str, str]:
    """Python keyword -> flag, read from the parser: each long option by its ``dest``
    (``n_clusters`` -> ``--n-clusters``), store_true/false flags also as ``"header=False"``
    (``--no-header``), a switch of another value only as ``"verbose=0"`` (``--quiet``)."""
    table: dict[str, str] = {}
    parser = build_parser()
    for sub in (parser, *subcommands(parser).values()):
        for action in sub._actions:
            flag = next((o for o in action.option_strings if o.startswith("--")), None)
            if flag is None or action.dest == "help":
                continue
            switch = isinstance(action, argparse._StoreConstAction)  # store_true/false too
            if switch:  # by its value: --quiet as verbose=0, --no-header as header=False, --overwrite as overwrite=True
                table.setdefault(f"{action.dest}={action.const}", flag)
            if not switch or isinstance(action, argparse._StoreTrueAction):  # a switch of another value: that only
                table.setdefault(action.dest, flag)
    return table


def cli_message(exc: object) -> str:
    """The text of ``exc`` (an exception, a warning or a :class:`~lswmkc_dask.errors.Message`)
    with the parameters it names spelled as flags (``n_clusters`` -> ``--n-clusters``);
    nothing else of the text changes, plain text is returned as it is."""
    return render_message(exc, flag_table())


def show_warning(message: Any, category: Any, filename: Any, lineno: Any, file: Any = None, line: Any = None) -> None:
    """``warnings.showwarning`` of a command: one ``lswmkc: warning:`` line naming flags."""
    print(f"lswmkc: warning: {cli_message(message)}", file=file or sys.stderr, flush=True)
