"""Exceptions raised on bad input."""

from __future__ import annotations

__all__ = ["KernelInputError"]


class KernelInputError(ValueError):
    """Base kernels, features or labels that LSWMKC cannot use.

    The message always says what is wrong and where: which file, which variable,
    which kernel (0-based, in input order) and which sample.
    """
