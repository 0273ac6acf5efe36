"""Exceptions raised on bad input."""

from __future__ import annotations

import os
import string
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

__all__ = [
    "MISSING", "ClusterWarning", "DegenerateKernelWarning", "DuplicateKernelWarning", "HeaderWarning",
    "KernelInputError", "Message",
    "Param", "ParameterError", "SnapshotWarning", "Verbatim", "default_flags", "message_of", "render_message",
    "warn_at_caller", "with_message",
]


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
    """A numeric first line of a feature CSV read as a header.

    The first line is the column numbers ``0,1,...,d-1`` (what pandas'
    ``DataFrame.to_csv`` writes as a header), so it is skipped, as ``pandas.read_csv``
    does; ``header=False`` (``--no-header``) reads it as a sample, ``header=True``
    (``--header``) skips it, both without the warning.
    """


class ClusterWarning(UserWarning):
    """The Dask cluster held a run up or lost part of it, and the run goes on: no worker
    connected yet, a lost scheduler connection or a slow scheduler waited for, a fit
    restarted from its checkpoint after a lost worker (its result is the same).

    Nothing in the call is wrong; the message says what is waited for and how long, or
    the iteration the fit restarted from. A wait that runs out ends with an error.
    """


class SnapshotWarning(UserWarning):
    """Snapshot iterations that were asked for (``snapshot_iterations``, ``--snapshots``)
    but not reached: the fit stopped before them, so nothing was kept for them.

    The message lists them and the iteration the fit stopped at; the report records
    them (``snapshots.not_reached`` of ``report.json``).
    """


class DuplicateKernelWarning(UserWarning):
    """Two or more base kernels are identical (the message names the pairs).

    Identical kernels count twice in the combined kernel; public kernel files sometimes
    store one kernel several times. They are kept as given.
    """


def warn_at_caller(message: str | Warning, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside this package (the user's
    line that called ``prepare``, ``fit`` or ``sweep``), however deep inside it was found.

    Parameters
    ----------
    message : str or Warning
        A Warning instance (e.g. from :func:`with_message`) is issued as it is.
    category : type of Warning
    """
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame: FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


# --- messages that name parameters ----------------------------------------------------
#
# A message that names a parameter of the library (``n_clusters``, ``overwrite=True``)
# is kept as a template (``str.format`` syntax) and its arguments, the parameters among
# them given as :class:`Param` markers. ``str()`` spells them as Python
# (``n_clusters``, ``overwrite=True``); the command line renders the same template with
# its table of flags (``--n-clusters``, ``--overwrite``). Only the markers change:
# every other argument (a path, a value) is formatted as it is, never rewritten.


class _Missing:
    """The value of a :class:`Param` named without a value."""

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:  # one instance, also after pickling
        return "MISSING"


#: No value: a :class:`Param` spelled as its name (``n_clusters``, ``--n-clusters``).
MISSING: Any = _Missing()


class Verbatim(str):
    """A value shown as written, without quotes: ``Param("n_clusters", Verbatim("k"))``
    reads ``n_clusters=k`` (Python) and ``--n-clusters k`` (command line).
    """

    def __repr__(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Param:
    """A parameter named in a message.

    Parameters
    ----------
    name : str
        The Python keyword (``"n_clusters"``); the command line looks up its flag by it.
    value : object, optional
        A value to show: Python spells ``name=value!r`` (``overwrite=True``,
        ``degenerate_kernels='drop'``), the command line ``--flag value`` (``--overwrite``
        for ``True``, ``--degenerate-kernels drop``, the store_false flag for ``False``).
    hint : {"", "or", "paren"}
        Python spelling followed by the command-line one, for messages read in both
        worlds: ``"or"`` gives ``overwrite=True or --overwrite``, ``"paren"``
        ``degenerate_kernels='drop' (--degenerate-kernels drop)``; the command line shows
        only its own.
    python : str, optional
        The Python spelling in place of the name, e.g. scikit-learn's
        ``"The 'alpha' parameter of LSWMKC"``.
    """

    name: str
    value: Any = MISSING
    hint: str = ""
    python: str | None = None

    def render(self, flags: Mapping[str, str] | None = None) -> str:
        """The Python spelling (``flags`` None) or the command line's (``flags`` maps
        Python names, and ``"name=False"`` for store_false flags, to flags); a parameter
        with no flag in ``flags`` keeps its Python spelling.
        """
        if flags is not None:
            flag = self._flag(flags)
            if flag is not None:
                return flag
        text = self.python or (self.name if self.value is MISSING else f"{self.name}={self.value!r}")
        if self.hint and flags is None:
            flag = self._flag(default_flags(self.name))
            text = f"{text} or {flag}" if self.hint == "or" else f"{text} ({flag})"
        return text

    def _flag(self, flags: Mapping[str, str]) -> str | None:
        if isinstance(self.value, bool):
            return flags.get(f"{self.name}={self.value}") or (flags.get(self.name) if self.value else None)
        flag = flags.get(self.name)
        if flag is None or self.value is MISSING:
            return flag
        return f"{flag} {self.value}"


def default_flags(name: str) -> dict[str, str]:
    """The command line's usual flags of ``name``: ``--n-clusters``, ``--no-header`` for
    ``header=False``.
    """
    flag = "--" + name.replace("_", "-")
    return {name: flag, f"{name}=True": flag, f"{name}=False": "--no-" + flag[2:]}


class _Formatter(string.Formatter):
    def __init__(self, flags: Mapping[str, str] | None) -> None:
        self.flags = flags

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        return value if isinstance(value, Param) else super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> str:
        return value.render(self.flags) if isinstance(value, Param) else super().format_field(value, format_spec)


class Message:
    """A message template (``str.format`` syntax) and its arguments, some of them
    :class:`Param` markers.

    ``str(message)`` is the Python text; ``message.render(flags)`` the same text with the
    parameters spelled as command-line flags.

    Examples
    --------
    >>> m = Message("{} must be an integer >= 1, got {!r}", Param("block_rows"), 0)
    >>> str(m), m.render({"block_rows": "--block-rows"})
    ('block_rows must be an integer >= 1, got 0', '--block-rows must be an integer >= 1, got 0')
    """

    def __init__(self, template: str, *args: Any, **kwargs: Any) -> None:
        self.template, self.args, self.kwargs = template, args, kwargs

    def render(self, flags: Mapping[str, str] | None = None) -> str:
        """The text, parameters spelled with ``flags`` (None: as Python)."""
        return _Formatter(flags).vformat(self.template, self.args, self.kwargs)

    @property
    def parameters(self) -> tuple[str, ...]:
        """The names of the parameters the message names, in order."""
        return tuple(a.name for a in (*self.args, *self.kwargs.values()) if isinstance(a, Param))

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        return f"Message({self.render()!r})"


def _restore(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class ParameterError(ValueError):
    """A parameter out of range or of the wrong kind (a ``ValueError``).

    Built from a template and its arguments as :class:`Message`; ``str(exc)`` names the
    parameter as Python, the command line as its flag.

    Parameters
    ----------
    template : str
    *args, **kwargs
        The template's arguments, parameters as :class:`Param`.

    Attributes
    ----------
    message : Message
    parameter : str or None
        The (first) parameter the message names.
    """

    message: Message

    def __init__(self, template: str, *args: Any, **kwargs: Any) -> None:
        self.message = Message(template, *args, **kwargs)
        super().__init__(str(self.message))

    @property
    def parameter(self) -> str | None:
        """The first parameter the message names."""
        names = self.message.parameters
        return names[0] if names else None

    def __reduce__(self) -> tuple[Any, ...]:  # (pickled across Dask: not rebuilt from the text)
        return _restore, (type(self), self.args, self.__dict__)


_E = TypeVar("_E", bound=BaseException)
_W = TypeVar("_W", bound=Warning)


def with_message(cls: type[_E], template: str, *args: Any, **kwargs: Any) -> _E:
    """An exception or warning of any type (``FileExistsError``, ``MemoryError``, a
    warning category) whose text names parameters: ``cls(str(message))`` carrying the
    :class:`Message` as ``.message``, from which the command line renders its flags.

    Examples
    --------
    >>> exc = with_message(FileExistsError, "output {} exists (pass {})", "o", Param("overwrite", True))
    >>> str(exc), exc.message.render({"overwrite": "--overwrite"})
    ('output o exists (pass overwrite=True)', 'output o exists (pass --overwrite)')
    """
    message = Message(template, *args, **kwargs)
    exc = cls(str(message))
    exc.message = message  # type: ignore[attr-defined]
    return exc


def message_of(obj: object) -> Message | None:
    """The :class:`Message` an exception or warning carries (None for plain text)."""
    if isinstance(obj, Message):
        return obj
    message = getattr(obj, "message", None)
    return message if isinstance(message, Message) else None


def render_message(obj: object, flags: Mapping[str, str] | None = None) -> str:
    """``obj``'s text with its parameters spelled by ``flags`` (the command line's table);
    plain text (an exception that names no parameter) as it is.
    """
    message = message_of(obj)
    return str(obj) if message is None else message.render(flags)
