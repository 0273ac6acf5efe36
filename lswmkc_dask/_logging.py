"""The package's logger, ``lswmkc_dask``: a library's, configured by the application.

Importing the package attaches one :class:`logging.NullHandler` and nothing else. Its
records are INFO notes nothing needs to act on (a figure not drawn, and why); what a user
must see is a warning instead (:class:`lswmkc_dask.errors.ClusterWarning`), since the
NullHandler hides records from Python's last-resort handler. The command line shows the
records on its standard error while it runs (:func:`command_line_output`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

ROOT = "lswmkc_dask"

if not any(isinstance(h, logging.NullHandler) for h in logging.getLogger(ROOT).handlers):  # (a reload adds none)
    logging.getLogger(ROOT).addHandler(logging.NullHandler())


class CurrentStderr(logging.StreamHandler):
    """A StreamHandler that writes to whatever ``sys.stderr`` is when a record comes."""

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record`` to the ``sys.stderr`` of this moment."""
        self.stream = sys.stderr
        super().emit(record)


@contextlib.contextmanager
def command_line_output(level: int = logging.INFO) -> Iterator[logging.Logger]:
    """The command line's logging while it runs: the package's records of ``level`` and
    above to the current standard error as ``lswmkc: <message>``, not propagated; all is
    put back on exit, and a nested call adds nothing.

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
