"""The package's logger, ``lswmkc_dask``: a library's, configured by the application.

Importing the package attaches one :class:`logging.NullHandler` to
``logging.getLogger("lswmkc_dask")`` and nothing else: no level, no other handler,
``propagate`` left as it is, the root logger untouched. Its records are INFO notes that
nothing needs to act on (a figure not drawn, and why); a program shows them by
configuring logging (``logging.basicConfig(level=logging.INFO)``, or a handler on
``logging.getLogger("lswmkc_dask")``).

What a Python user must see without configuring anything is not a log record but a
warning (:func:`warnings.warn`, shown once per message and calling line, filtered like
any other): a wait for the Dask cluster (no worker yet, a lost scheduler connection) and
a fit restarted from its checkpoint after a lost worker are
:class:`lswmkc_dask.errors.ClusterWarning`. A WARNING record would not do: Python prints
records of a logger without handlers (its last-resort handler), but the NullHandler
counts as one, so they would be hidden.

The ``lswmkc`` command line shows the records at INFO and above on its standard error,
``lswmkc: <message>``, while it runs (:func:`command_line_output`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

__all__ = ["CurrentStderr", "command_line_output", "get_logger"]

ROOT = "lswmkc_dask"

if not any(isinstance(h, logging.NullHandler) for h in logging.getLogger(ROOT).handlers):  # (a reload adds none)
    logging.getLogger(ROOT).addHandler(logging.NullHandler())


class CurrentStderr(logging.StreamHandler):
    """A StreamHandler that writes to whatever ``sys.stderr`` is when a record comes (a
    test's or a caller's redirection included).
    """

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record`` to the ``sys.stderr`` of this moment."""
        self.stream = sys.stderr
        super().emit(record)


@contextlib.contextmanager
def command_line_output(level: int = logging.INFO) -> Iterator[logging.Logger]:
    """The command line's logging while it runs: the package's records of ``level`` and
    above to the standard error current when each comes, as ``lswmkc: <message>``, and
    not passed on to the root logger (a program that runs the command in its process
    gets each line once). The handler, the level and ``propagate`` are put back on exit;
    within a run that already shows them (a nested call) nothing is added.

    Parameters
    ----------
    level : int
        The lowest level shown.

    Yields
    ------
    logging.Logger
        The ``lswmkc_dask`` logger.
    """
    logger = logging.getLogger(ROOT)
    if any(isinstance(h, CurrentStderr) for h in logger.handlers):
        yield logger
        return
    handler = CurrentStderr()
    handler.setFormatter(logging.Formatter("lswmkc: %(message)s"))
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield logger
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def get_logger(name: str) -> logging.Logger:
    """The logger of module ``name`` (a child of ``lswmkc_dask``'s).

    Parameters
    ----------
    name : str
        ``__name__`` of the calling module.

    Returns
    -------
    logging.Logger
    """
    return logging.getLogger(name)
