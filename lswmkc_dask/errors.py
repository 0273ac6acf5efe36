"""Exceptions raised on bad input."""

from __future__ import annotations

__all__ = ["DegenerateKernelWarning", "KernelInputError"]


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
