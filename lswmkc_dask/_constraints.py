"""The constraints of the parameter table (:mod:`lswmkc_dask._params`), and their check.

A constraint is a tuple of alternatives, as scikit-learn declares ``_parameter_constraints``:
:class:`Interval`, :class:`Options`, :class:`Types`, :class:`HasMethods` or ``None``.
:func:`check` tests a value, :func:`describe` words it as scikit-learn does; the same
declaration gives a flag its argparse type (:meth:`Interval.parse`) and choices.
"""

from __future__ import annotations

import argparse
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, cast


class Constraint:
    """One alternative of a parameter's constraint."""

    def accepts(self, value: Any) -> bool:  # pragma: no cover - every subclass has its own
        """Whether ``value`` satisfies it."""
        raise NotImplementedError


class Interval(Constraint):
    """Integers or floats between ``lo`` and ``hi`` (both included; no ``hi``: no bound).

    Parameters
    ----------
    kind : {numbers.Integral, numbers.Real}
        Integers (``bool`` included) or real numbers (never NaN; infinity only below ``hi``).
    lo : int or float
    hi : int or float, optional
    """

    def __init__(self, kind: type, lo: float, hi: float | None = None) -> None:
        self.kind, self.lo, self.hi = kind, lo, hi

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is of the kind and within the bounds."""
        if not isinstance(value, self.kind):
            return False
        number = cast(float, value)  # an int or a real of the kind
        if not isinstance(number, numbers.Integral) and math.isnan(number):
            return False
        return self.lo <= number and (number < math.inf if self.hi is None else number <= self.hi)

    def __str__(self) -> str:
        integral = self.kind is numbers.Integral
        lo, hi = (self.lo, self.hi) if integral else (float(self.lo), None if self.hi is None else float(self.hi))
        return f"{'an int' if integral else 'a float'} in the range [{lo}, {'inf)' if hi is None else f'{hi}]'}"

    def parse(self) -> Callable[[str], Any]:
        """The argparse type of a flag under this constraint.

        Returns
        -------
        callable
            ``str -> int`` (or float), raising ``argparse.ArgumentTypeError`` naming the
            value and the bounds ("must be an integer in [1, 10000], got 0").
        """
        lo, hi = self.lo, self.hi
        integral = self.kind is numbers.Integral
        noun, convert = ("an integer", int) if integral else ("a finite number", float)

        def parse(text: str) -> Any:
            try:
                value = convert(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected {'an integer' if integral else 'a number'}, got {text!r}") \
                    from None
            if not self.accepts(value):
                bounds = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
                raise argparse.ArgumentTypeError(f"must be {noun} {bounds}, got {text if not integral else value}")
            return value

        parse.__name__ = "integer" if integral else "number"  # named in argparse's "invalid integer value"
        return parse


class Options(Constraint):
    """One of some strings, in the order given (the command line's choices).

    Parameters
    ----------
    values : iterable of str
    """

    def __init__(self, values: Sequence[str]) -> None:
        self.values = tuple(dict.fromkeys(values))

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is one of the strings."""
        return isinstance(value, str) and value in self.values

    def __str__(self) -> str:
        return f"a str among {{{', '.join(repr(v) for v in self.values)}}}"


class Types(Constraint):
    """An instance of one of some types, each a type or a function returning one (imported
    when first checked: the command line starts without it).

    Parameters
    ----------
    *types : type or callable
    """

    def __init__(self, *types: type | Callable[[], type]) -> None:
        self.types = types

    def _resolved(self) -> tuple[type, ...]:
        return tuple(t if isinstance(t, type) else t() for t in self.types)

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is an instance of one of the types."""
        return isinstance(value, self._resolved())

    def __str__(self) -> str:
        return " or ".join(f"an instance of {_type_name(t)!r}" for t in self._resolved())


class HasMethods(Constraint):
    """An object with these methods (a duck type: a Dask client).

    Parameters
    ----------
    *methods : str
    """

    def __init__(self, *methods: str) -> None:
        self.methods = methods

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has every method."""
        return all(callable(getattr(value, m, None)) for m in self.methods)

    def __str__(self) -> str:
        names = [repr(m) for m in self.methods]
        return "an object implementing " + (f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else names[0])


def _type_name(t: type) -> str:
    """``int``, ``numpy.random.mtrand.RandomState``: as scikit-learn names a type."""
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def describe(constraint: Sequence[Constraint | None]) -> str:
    """What a constraint accepts, in words: "an int in the range [2, inf) or None"."""
    words = ["None" if c is None else str(c) for c in constraint]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def check(constraint: Sequence[Constraint | None], value: Any) -> bool:
    """Whether ``value`` satisfies one alternative of ``constraint`` (``None``: is None)."""
    return any(value is None if c is None else c.accepts(value) for c in constraint)
