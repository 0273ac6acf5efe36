"""Messages of the command line: the library's messages with the parameters they name
spelled as flags (``n_clusters`` -> ``--n-clusters``), read from the parser."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from ..errors import render_message
from .parser import build_parser

__all__ = ["cli_message", "flag_table", "show_warning"]


@functools.lru_cache(maxsize=1)
def flag_table() -> dict[str, str]:
    """Python keyword -> command-line flag, read from the parser: every long option by its
    ``dest`` (``n_clusters`` -> ``--n-clusters``), store_true/store_false flags also as
    ``"name=True"``/``"name=False"`` (``header=False`` -> ``--no-header``), a switch of
    another value only as ``"name=value"`` (``verbose=0`` -> ``--quiet``)."""
    table: dict[str, str] = {}
    parser = build_parser()
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for sub in (parser, *(p for a in commands for p in a.choices.values())):
        for action in sub._actions:
            flag = next((o for o in action.option_strings if o.startswith("--")), None)
            if flag is None or action.dest == "help":
                continue
            if isinstance(action, argparse._StoreTrueAction):
                table.setdefault(f"{action.dest}=True", flag)
            elif isinstance(action, argparse._StoreFalseAction):
                table.setdefault(f"{action.dest}=False", flag)
                continue
            elif isinstance(action, argparse._StoreConstAction):  # a switch: its value only (--quiet: verbose=0)
                table.setdefault(f"{action.dest}={action.const}", flag)
                continue
            table.setdefault(action.dest, flag)
    return table


def cli_message(exc: object) -> str:
    """The text of ``exc`` (an exception, a warning or a :class:`~lswmkc_dask.errors.Message`)
    with the parameters it names spelled as command-line flags.

    The library keeps such messages as a template and its parameters
    (:class:`~lswmkc_dask.errors.Param`): ``overwrite=True or --overwrite`` reads
    ``--overwrite``, ``n_clusters must be ...`` ``--n-clusters must be ...``,
    ``degenerate_kernels='drop'`` ``--degenerate-kernels drop``. Nothing else of the text
    changes (file paths, values); plain text is returned as it is.
    """
    return render_message(exc, flag_table())


def show_warning(message: Any, category: Any, filename: Any, lineno: Any, file: Any = None, line: Any = None) -> None:
    """``warnings.showwarning`` of a command: one ``lswmkc: warning:`` line naming flags."""
    print(f"lswmkc: warning: {cli_message(message)}", file=file or sys.stderr, flush=True)
