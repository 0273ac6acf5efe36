"""``lswmkc``'s entry point: the command line parsed and checked, the command run with
one error line and an exit status for each way it can end (Ctrl-C and SIGTERM unwound,
a lost scheduler, a full disk)."""

from __future__ import annotations

import logging
import re
import signal
import sys
import warnings
from collections.abc import Sequence

from .._logging import command_line_output
from ..engine.gpu import DeviceUnavailableError
from ..engine.scheduler import SchedulerLostError, probe_scheduler, scheduler_address, short_reason
from ..errors import CLIError, KernelInputError
from ._parser import COMMANDS, build_parser, cli_message, show_warning
from ._validate import check_args, check_flags


class _Terminated(KeyboardInterrupt):
    """SIGTERM, unwound like Ctrl-C; the exit status is 128 + 15."""


def _on_signal(signum, frame):  # pragma: no cover - exercised by a subprocess test
    """Ctrl-C or SIGTERM: raised as KeyboardInterrupt (SIGTERM as :class:`_Terminated`), the event loop's
    teardown tracebacks muted (distributed's cancel callback run before its future exists: noise; the one
    "interrupted" line says it all)."""
    for name in ("tornado.application", "asyncio", "distributed"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    raise _Terminated(f"signal {signum}") if signum == signal.SIGTERM else KeyboardInterrupt


def _name_labels_file(text, args):
    """Name the --labels file in a length error raised where only "labels" was known."""
    path = getattr(args, "labels", None)
    if path and text.startswith("labels have length "):
        return f"labels in {path} have length " + text[len("labels have length "):]
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lswmkc``; returns the exit status (0 ok, 1 a failed run: full disk, out of memory, the
    scheduler lost; 2 bad input; 130 Ctrl-C, 143 SIGTERM), with one ``lswmkc: error:`` line on an error."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    check_flags(parser, argv)
    args = parser.parse_args(argv)
    check_args(parser, args)

    # SIGTERM unwinds like Ctrl-C: temporary outputs are removed, the cluster is closed.
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _on_signal)
    if saved[signal.SIGINT] is signal.default_int_handler:  # (not when ignored, as in `cmd &`)
        signal.signal(signal.SIGINT, _on_signal)
    try:
        with command_line_output():  # the package's log records as `lswmkc: ...` lines, for this run only
            return _run(args)
    finally:  # the caller's handlers back (main() may be called in a process that goes on)
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def _run(args):
    """The command of ``args`` with the CLI's error handling (see :func:`main`)."""
    # distributed's INFO records ("Batched Comm Closed" with a traceback) would precede the one error
    # line: its level is set where distributed reads it on import, and on its logger if imported.
    import dask

    if "version" not in (dask.config.get("logging", None) or {}):  # (not a user's dictConfig)
        dask.config.set({"logging.distributed": "warning"})
    dask_log = logging.getLogger("distributed")
    if "distributed" in sys.modules and dask_log.getEffectiveLevel() < logging.WARNING:
        dask_log.setLevel(logging.WARNING)
    client_log = logging.getLogger("distributed.client")
    client_log.addFilter(_QUIET_RECONNECT)  # for this command only (main() may run inside a program)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = show_warning
            return COMMANDS[args.command][1](args)
    except KeyboardInterrupt as exc:
        if args.command in ("sweep", "compare"):
            print("lswmkc: interrupted; finished results are kept, rerun the same command to go on", file=sys.stderr)
        else:  # outputs are written under a temporary name and renamed when complete
            print("lswmkc: interrupted; nothing was written", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT)
    except (SchedulerLostError, MemoryError, DeviceUnavailableError) as exc:  # a failed run; no GPU: bad input
        print(f"lswmkc: error: {cli_message(exc) or 'out of memory'}", file=sys.stderr)
        return 2 if isinstance(exc, DeviceUnavailableError) else 1
    except (CLIError, KernelInputError, FileNotFoundError, FileExistsError, PermissionError, ValueError,
            ConnectionError) as exc:
        print(f"lswmkc: error: {_name_labels_file(cli_message(exc), args)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a failed run: the disk filled, the file system went read-only, an I/O error
        lost = _lost_scheduler(exc, args)
        if lost is None and isinstance(exc, TimeoutError) and exc.errno is None:  # no Dask worker came
            lost = cli_message(exc)
        print(f"lswmkc: error: {lost or _os_error_message(exc, args)}", file=sys.stderr)
        return 1
    except Exception as exc:  # e.g. distributed's CommClosedError or a cancelled future, with the scheduler gone
        lost = _lost_scheduler(exc, args)
        if lost is None:
            raise
        print(f"lswmkc: error: {lost}", file=sys.stderr)
        return 1
    finally:
        client_log.removeFilter(_QUIET_RECONNECT)


#: Start of the record that ``distributed.Client`` logs (ERROR) when its scheduler did not
#: come back within the connect timeout: the command's own error line says so, and what to do.
RECONNECT_FAILED = "Failed to reconnect to scheduler after"


class QuietReconnectFailure(logging.Filter):
    """Drops ``distributed.client``'s "Failed to reconnect to scheduler" record while a
    command runs (its own error line names the address and what to do); others pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for the reconnection failure (dropped), True for any other record."""
        return not str(record.msg).startswith(RECONNECT_FAILED)


_QUIET_RECONNECT = QuietReconnectFailure()



def _lost_scheduler(exc, args):
    """The one-line message when ``exc`` ended a run on a --scheduler that no longer answers, else None."""
    try:
        address = getattr(args, "scheduler", None) or scheduler_address(None, getattr(args, "scheduler_file", None))
    except (OSError, ValueError, AttributeError):
        address = None
    if not address or probe_scheduler(address) is None:  # it answers (or cannot be probed): not a lost scheduler
        return None
    return str(SchedulerLostError(address, short_reason(exc)))


#: numpy's message for a short write (``ndarray.tofile``, ``np.save``): no errno, a full disk.
_SHORT_WRITE = re.compile(r"^\d+ requested and \d+ written$")


def _os_error_message(exc, args):
    """One line for an OSError that ended a run: what failed, where, and what to do."""
    import errno

    where = exc.filename or getattr(args, "output", None) or "the output"
    kept = ("finished results are kept: rerun the same command to go on" if args.command in ("sweep", "compare")
            else "nothing partial was kept")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or (exc.errno is None and _SHORT_WRITE.match(str(exc))):
        return f"no space left on the device while writing {where}; free space or choose another output ({kept})"
    if exc.errno == errno.EROFS:
        return f"{where} is on a read-only file system; choose another output ({kept})"
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{reason} ({where}); {kept}"

