"""Exceptions raised on bad input."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["DegenerateKernelWarning", "KernelInputError", "warn_at_caller"]


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


def warn_at_caller(message, category):
    """``warnings.warn`` attributed to the first frame outside this package (the user's
    line that called ``prepare``, ``fit`` or ``sweep``), however deep inside it was found.

    Parameters
    ----------
    message : str
    category : type of Warning
    """
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
