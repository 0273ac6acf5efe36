"""The checks of a command line before any input is read: unknown flags (with the
closest known one) and a k grid given to ``fit`` before parsing; then ``--min-iter``
against ``--max-iter``, compare's taus and the flags saying where to run (argparse has
checked each value against its row's constraint). Each error names the flag."""

from __future__ import annotations

import argparse
import difflib
import itertools
from collections.abc import Sequence
from pathlib import Path

from ._base import subcommands
from ._parser import cli_message


def check_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Refuse, before argparse parses ``argv``, an unknown flag with the closest known
    one (``--alpah``: "did you mean --alpha?") in one line without the usage, and a k grid
    given to ``fit`` (``fit --n-clusters 3 4``); exit 2. A prefix of a known flag is known
    (argparse expands it); tokens after ``--`` are not flags.
    """
    commands = subcommands(parser)
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if at is None or argv[at] not in commands:
        return  # no command, or an unknown one: argparse says so, listing the commands
    command, rest, sub = argv[at], list(argv[at + 1:]), commands[argv[at]]
    options = sorted({o for a in sub._actions for o in a.option_strings if o.startswith("--")})
    for token in itertools.takewhile(lambda t: t != "--", rest):
        flag = token.split("=", 1)[0]
        if not flag.startswith("--") or " " in flag or flag in options:
            continue  # a value (argparse takes a dash-led text with a space for one), or a known flag (no abbreviations)
        close = difflib.get_close_matches(flag, options, n=1)
        # one line, without the usage of some 18 lines above it (``-h`` lists the flags)
        sub.exit(2, f"{sub.prog}: error: unrecognized argument {flag}" + (
            f"; did you mean {close[0]}?\n" if close else f": `lswmkc {command} -h` lists the flags\n"))
    if command == "fit" and "--n-clusters" in rest:
        after = rest[rest.index("--n-clusters") + 1:]
        ks = list(itertools.takewhile(lambda t: t.isdigit() and not Path(t).exists(), after))
        if len(ks) > 1:
            sub.error(f"fit takes one --n-clusters K, got {' '.join(ks)}; a k grid is swept: lswmkc sweep INPUT "
                      f"--n-clusters {' '.join(ks)} --output DIR (one fit per alpha, clustered at every k, the "
                      "label-free choice covering k)")


def _check_iterations(args: argparse.Namespace) -> None:
    """``--min-iter`` above ``--max-iter`` refused, naming both; unset, the default 20 (the
    Python API's ``min_iter``), which a smaller ``--max-iter`` simply does not reach."""
    if not hasattr(args, "min_iter"):
        return
    from .._params import MIN_ITER
    from .._validate import check_iterations

    if args.min_iter is None:
        args.min_iter = MIN_ITER
        return
    check_iterations(args.max_iter, args.min_iter, default_allowed=False)


def _check_taus(args: argparse.Namespace) -> None:
    """compare's taus, as compare() checks them (ValueError for a tau outside (0, 1])."""
    if args.command == "compare" and "knn" in args.methods:
        from ..report.localise import neighbour_count

        for tau in args.taus:
            neighbour_count(tau, 1)


def _check_where(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--n-workers with a scheduler, and TLS files without one, refused."""
    scheduler = getattr(args, "scheduler", None) or getattr(args, "scheduler_file", None)
    if getattr(args, "n_workers", None) and scheduler:
        parser.error("--n-workers starts a private LocalCluster; it cannot be used with --scheduler or "
                     "--scheduler-file (the existing cluster's workers are used)")
    if not scheduler and any(getattr(args, name, None) for name in ("tls_ca_file", "tls_cert", "tls_key")):
        subcommands(parser)[args.command].error("--tls-ca-file/--tls-cert/--tls-key need --scheduler or "
                                                "--scheduler-file")


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The parsed options of a command checked together, before any input is read (errors
    through ``parser``: one line naming the flags, exit 2; ``args.min_iter`` unset becomes
    the default). k and c against n are checked once the input is read.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The parser of ``lswmkc``.
    args : argparse.Namespace
        Its result.
    """
    try:
        _check_iterations(args)
        _check_where(parser, args)
        _check_taus(args)
    except ValueError as exc:
        subcommands(parser)[args.command].error(cli_message(exc))
