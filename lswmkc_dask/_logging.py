"""The package's logger: messages of the library (waiting for workers, a lost
connection, a fit restarted after a lost worker) go through :mod:`logging`.

``logging.getLogger("lswmkc_dask")`` prints records of level INFO and above to the
standard error current at the time (``lswmkc: <message>``) and does not propagate to
the root logger, as Dask's ``distributed`` logger does; set its level
(``logging.getLogger("lswmkc_dask").setLevel(logging.ERROR)`` silences the waits) or
replace its handlers to route them elsewhere.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["get_logger"]

ROOT = "lswmkc_dask"


class _CurrentStderr(logging.StreamHandler):
    """A StreamHandler that writes to whatever ``sys.stderr`` is when a record comes."""

    def emit(self, record):
        self.stream = sys.stderr
        super().emit(record)


def _configure():
    logger = logging.getLogger(ROOT)
    if not any(isinstance(h, _CurrentStderr) for h in logger.handlers):
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("lswmkc: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


_configure()


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
