"""Progress for the user: the one place that writes it, and one switch that silences it.

A fit's iterations, a grid's points (a bar, the point's result, elapsed time and an ETA
that counts the fits running at once) and a sweep's stages go to standard error, the
final table to standard output, each line flushed to the stream current when written.
``Progress(enabled=False)`` writes nothing (``verbose=0``, ``progress=False``,
``--quiet``); a restart after a lost worker is a warning whatever the switch
(:func:`log_restarts`). Plain lines, not a task counter or a bar redrawn in place: two
of a grid's routes have no futures, and the lines stay readable in a log file.
"""

from __future__ import annotations

import math
import sys
import time
from typing import IO, Any

from ..errors import ClusterWarning, warn_at_caller

#: Characters of a grid's progress bar.
BAR_WIDTH = 20


def log_restarts(t: int, objective: float, change: float, seconds: float, restarted: str | None = None) -> None:
    """A fit's ``callback`` that writes nothing per iteration and warns of each restart.

    Parameters
    ----------
    t, objective, change, seconds
        The iteration, Eq. (10), ``||K*_t - K*_{t-1}||_F`` and its seconds (unused).
    restarted : str, optional
        Why the fit restarted from a checkpoint (a lost worker): a
        :class:`~lswmkc_dask.errors.ClusterWarning` with this message.
    """
    if restarted:
        warn_at_caller(restarted, ClusterWarning)


def _eta(done: int, total: int, elapsed: float, concurrency: int, resumed: int) -> float:
    """Seconds left of a grid (:func:`grid_point_line`'s rule); NaN before any point of this call."""
    ran = done - resumed  # finished by this call, in ``elapsed``
    slots = max(1, min(int(concurrency), total - resumed))
    return elapsed * (total - done) / max(ran, slots) if ran > 0 else math.nan


def grid_point_line(done: int, total: int, point: Any, report: dict, started: float, concurrency: int = 1,
                    resumed: int = 0) -> str:
    """The progress line of a finished grid point: a bar, done/total, the point's result, elapsed and ETA.

    Parameters
    ----------
    done, total : int
        Grid points finished (this one included) and in the grid.
    point : GridPoint
        The finished point (its ``name``, the run directory's).
    report : dict
        Its ``report.json`` (``n_iter``, ``iteration_seconds_total``, the honest ACC).
    started : float
        ``time.perf_counter()`` when this call's fits started.
    concurrency : int
        Fits run at once, all from ``started`` on.
    resumed : int
        Of the ``done`` points, those finished before (a resumed sweep).

    Returns
    -------
    str
        ``[####......] 3/11 alpha=4_c=5: 20 it, 1.2 s, ACC 0.5636 | elapsed 4 s, ETA 11 s``.

    Notes
    -----
    The ETA: ``concurrency`` points per elapsed time until that many have finished
    (they all ran since the start), then the observed rate.
    """
    elapsed = time.perf_counter() - started
    eta = _eta(done, total, elapsed, concurrency, resumed)
    acc = report.get("metrics", {}).get("honest", {}).get("ACC")
    if acc is not None and report.get("by_n_clusters"):  # a k grid: the k is chosen after the grid
        acc_text = f", ACC {acc:.4f} at k={report['params']['n_clusters']} (the run's k is chosen at the end)"
    else:
        acc_text = f", ACC {acc:.4f}" if acc is not None else ""
    filled = int(BAR_WIDTH * done / total)
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    return (f"[{bar}] {done}/{total} {point.name}: {report['n_iter']} it, {report['iteration_seconds_total']:.1f} s"
            + acc_text + f" | elapsed {elapsed:.0f} s, ETA {eta:.0f} s")


class Progress:
    """Where a computation's progress goes: standard error, or nowhere.

    Parameters
    ----------
    enabled : bool
        False: write nothing (``verbose=0``, ``progress=False``, ``--quiet``).
    err : file, optional
        The stream of the progress lines (default: ``sys.stderr`` when each is written).
    out : file, optional
        The stream of :meth:`result` (default: ``sys.stdout`` when it is written).

    Examples
    --------
    >>> Progress(False).say("nothing")  # silent
    """

    def __init__(self, enabled: bool = True, *, err: IO[str] | None = None, out: IO[str] | None = None) -> None:
        self.enabled = bool(enabled)
        self._err = err
        self._out = out

    def say(self, text: str) -> None:
        """Write one progress line (standard error), flushed.

        Parameters
        ----------
        text : str
            The line, without its end.
        """
        if self.enabled:
            print(text, file=self._err or sys.stderr, flush=True)

    def result(self, text: str) -> None:
        """Write the result a computation ends with (standard output), flushed.

        Parameters
        ----------
        text : str
            The result (a table), without its last line end.
        """
        if self.enabled:
            print(text, file=self._out or sys.stdout, flush=True)

    def iteration(self, t: int, objective: float, change: float, seconds: float,
                  restarted: str | None = None) -> None:
        """A fit's ``callback``: the line of an iteration, or a restart's warning.

        Parameters
        ----------
        t : int
            The iteration (1-based).
        objective : float
            The objective of Eq. (10) after it.
        change : float
            ``||K*_t - K*_{t-1}||_F``, the stop rule's measure.
        seconds : float
            Wall-clock seconds of the iteration.
        restarted : str, optional
            Why the fit restarted: a warning (:func:`log_restarts`), even when disabled.
        """
        if restarted:
            log_restarts(t, objective, change, seconds, restarted)
        else:
            self.say(f"iter {t:3d}  objective {objective: .10g}  ||K*_t - K*_t-1|| {change:.4g}  {seconds:.2f} s")

    def grid_point(self, done: int, total: int, point: Any, report: dict, started: float, *, concurrency: int = 1,
                   resumed: int = 0) -> None:
        """The line of a finished grid point (:func:`grid_point_line`).

        Parameters
        ----------
        done, total, point, report, started, concurrency, resumed
            As :func:`grid_point_line`.
        """
        if self.enabled:
            self.say(grid_point_line(done, total, point, report, started, concurrency, resumed))
