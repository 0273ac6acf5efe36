"""Exceptions raised on bad input."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

__all__ = ["DegenerateKernelWarning", "DuplicateKernelWarning", "HeaderWarning", "KernelInputError", "warn_at_caller"]


class KernelInputError(ValueError):
    """Base kernels, features or labels that LSWMKC cannot use.

    The message always says what is wrong and where: which file, which variable,
    which kernel (0-based, in input order) and which sample.
    """


class DegenerateKernelWarning(UserWarning):
    """A base kernel is numerically constant and carries no information.

    Its entries all lie within rounding distance of one value, so after centring only
    rounding error is left. The message names the kernel and what was done with it
    (kept as the reference code keeps it, or dropped).
    """


class HeaderWarning(UserWarning):
    """A numeric first line of a feature CSV that looks like a header.

    The first line is the column numbers ``0,1,...,d-1`` (what pandas'
    ``DataFrame.to_csv`` writes as a header). It is read as a sample, as every numeric
    first line is; ``header=True`` (``--header``) skips it, ``header=False``
    (``--no-header``) keeps it without the warning.
    """


class DuplicateKernelWarning(UserWarning):
    """Two or more base kernels are identical (the message names the pairs).

    Identical kernels count twice in the combined kernel; public kernel files sometimes
    store one kernel several times. They are kept as given.
    """


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside this package (the user's
    line that called ``prepare``, ``fit`` or ``sweep``), however deep inside it was found.

    Parameters
    ----------
    message : str
    category : type of Warning
    """
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame: FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
