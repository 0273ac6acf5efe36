"""The package's exceptions and warnings (every class of them, to catch by name), and messages that name parameters.

A message naming a parameter is a template (``str.format`` syntax) with :class:`Param`
markers: ``str()`` spells them as Python (``overwrite=True``), the command line renders
the same template with its flags (``--overwrite``); nothing else of the text changes.
"""

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
    "ArrayFileError", "CLIError", "ClusterWarning", "DegenerateKernelWarning", "DeviceFallbackWarning",
    "DeviceUnavailableError", "DuplicateKernelWarning", "EigenvectorMemoryError", "FigureUnavailableError",
    "ForeignOutputError", "HeaderWarning", "InvalidParameter", "KernelInputError", "MatplotlibMissingError",
    "Message", "ModelFileError", "ModelVersionError", "OtherDataError", "OutputInUseError", "OutputNotWritableError",
    "Param", "ParameterError", "ProtectedOutputError", "ResidentRefusal", "ResultFileError", "SchedulerLostError",
    "SnapshotWarning", "StoreFileError", "StoreUnreadableError", "UncheckedKernelWarning", "Verbatim",
    "ViewMismatchError", "ViewOrderWarning", "WorkerMemoryError", "WorkersLostError", "render_message",
    "warn_at_caller", "with_message",
]


class KernelInputError(ValueError):
    """Kernels, features or labels LSWMKC cannot use; the message says what and where (file, kernel, sample)."""


class DegenerateKernelWarning(UserWarning):
    """A numerically constant base kernel; the message names it and whether it was kept or dropped."""


class HeaderWarning(UserWarning):
    """A feature CSV's first line ``0,1,...,d-1`` (pandas' header) skipped as a header."""


class ClusterWarning(UserWarning):
    """The Dask cluster held a run up or lost part of it (a wait, a restart), and the run goes on."""


class SnapshotWarning(UserWarning):
    """Snapshot iterations asked for but not reached (listed, with the iteration the fit stopped at)."""


class DuplicateKernelWarning(UserWarning):
    """Two or more identical base kernels (the pairs named); they are kept as given."""


def warn_at_caller(message: str | Warning, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside this package (the user's call).

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


# --- messages that name parameters ---------------------------------------------------


class _Missing:
    """The value of a :class:`Param` named without a value."""

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:  # one instance, also after pickling
        return "_MISSING"


#: No value: a :class:`Param` spelled as its name (``n_clusters``, ``--n-clusters``).
_MISSING: Any = _Missing()


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
        Python spells ``name=value!r`` (``overwrite=True``), the command line
        ``--flag value`` (``--overwrite`` for True, the store_false flag for False).
    hint : {"", "or", "paren"}
        Python spelling followed by the flag: ``overwrite=True or --overwrite``
        (``"or"``), ``degenerate_kernels='drop' (--degenerate-kernels drop)`` (``"paren"``).
    python : str, optional
        The Python spelling in place of the name (``"The 'alpha' parameter of LSWMKC"``).
    """

    name: str
    value: Any = _MISSING
    hint: str = ""
    python: str | None = None

    def render(self, flags: Mapping[str, str] | None = None) -> str:
        """The Python spelling (``flags`` None) or the flag ``flags`` maps it to (else Python's)."""
        if flags is not None:
            flag = self._flag(flags)
            if flag is not None:
                return flag
        text = self.python or (self.name if self.value is _MISSING else f"{self.name}={self.value!r}")
        if self.hint and flags is None:
            flag = "--" + self.name.replace("_", "-")
            flag = self._flag({self.name: flag, f"{self.name}=True": flag, f"{self.name}=False": "--no-" + flag[2:]})
            text = f"{text} or {flag}" if self.hint == "or" else f"{text} ({flag})"
        return text

    def _flag(self, flags: Mapping[str, str]) -> str | None:
        if isinstance(self.value, bool):
            return flags.get(f"{self.name}={self.value}") or (flags.get(self.name) if self.value else None)
        flag = flags.get(self.name)
        if flag is None or self.value is _MISSING:
            return flag
        return f"{flag} {self.value}"


class _Formatter(string.Formatter):
    def __init__(self, flags: Mapping[str, str] | None) -> None:
        self.flags = flags

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        return value if isinstance(value, Param) else super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> str:
        return value.render(self.flags) if isinstance(value, Param) else super().format_field(value, format_spec)


class Message:
    """A message template (``str.format`` syntax) and its arguments, some :class:`Param`.

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
    """A parameter out of range or of the wrong kind (a ``ValueError``), its text a :class:`Message`.

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
    """``cls(str(message))`` (any exception or warning type) carrying the :class:`Message` as ``.message``.

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


def render_message(obj: object, flags: Mapping[str, str] | None = None) -> str:
    """The text of an exception, warning or :class:`Message`, its parameters spelled by ``flags``."""
    message = obj if isinstance(obj, Message) else getattr(obj, "message", None)
    if not isinstance(message, Message):
        return str(obj)
    return message.render(flags)


# --- moved from the modules that raise them (one place for every exception class)


class MatplotlibMissingError(ImportError):
    """matplotlib cannot be imported; the message says how to install it."""


class FigureUnavailableError(ValueError):
    """A figure cannot be drawn from what a directory holds (the message says why)."""


class CLIError(Exception):
    """A usage problem found by the command line itself: printed as one line, exit 2."""


class InvalidParameter(ParameterError, TypeError):
    """A parameter of the wrong type or out of its range, in scikit-learn's words ("The
    'n_init' parameter of LSWMKC must be an int in the range [1, 10000]. Got 0
    instead."): a ``ValueError`` and ``TypeError`` as scikit-learn's ``InvalidParameterError``.
    """


class OtherDataError(ValueError):
    """A sweep (or compare) directory holds results computed on other data."""


class ProtectedOutputError(ValueError):
    """The output is a directory that is never replaced (working/home directory, ``/`` ...)."""


class OutputNotWritableError(PermissionError):
    """The output's location cannot be written (read-only, full, no permission)."""


class OutputInUseError(FileExistsError):
    """Another lswmkc process is running in the output directory."""


class ForeignOutputError(FileExistsError):
    """The output exists and was not written by lswmkc (or is a file): never replaced."""


class ArrayFileError(ValueError):
    """An array file of lswmkc (``.npz`` or ``.npy``) that is damaged or not what it
    should be; the message names the file and, in an archive, the member.
    """

    #: What the message tells the user to do.
    remedy = "write it again (rerun the lswmkc command that wrote it)"


class UserArrayFileError(ArrayFileError):
    """A user's ``.npz`` file of kernels, features or labels that cannot be read (read as a
    :class:`KernelInputError` naming the file and the array).
    """

    #: What the message tells the user to do.
    remedy = "save the arrays again with numpy.savez (uncompressed; numbers, or text as a fixed-width array)"


class ResultFileError(ArrayFileError):
    """A file of a fit or sweep directory that is not a regular file, or whose content
    is not what lswmkc writes; the message names the file.
    """


class ModelFileError(ArrayFileError):
    """The file is not an lswmkc model file, or it is damaged or made up (a ``ValueError``;
    the message names the file and the member).
    """

    remedy = "save the model again (LSWMKC.save, or `lswmkc fit --output DIR`)"


class ModelVersionError(ModelFileError):
    """The model file was written in a newer format version than this package reads."""


# --- moved from the modules that raise them (one place for every exception class)


class StoreFileError(KernelInputError):
    """A file of a local kernel store that is not read: not a regular file (a FIFO, a device, a
    socket, a directory), larger than its bound, or metadata that is not a JSON object.

    Parameters
    ----------
    problem : str
        What is wrong, naming the file (without the store's remedy).
    message : str, optional
        The whole message (default ``problem``), e.g. with the store's name and what to do.

    Attributes
    ----------
    problem : str
    """

    def __init__(self, problem: str, message: str | None = None):
        super().__init__(problem if message is None else message)
        self.problem = problem

    def __reduce__(self):  # both arguments survive pickling (an error raised on a Dask worker)
        return type(self), (self.problem, str(self))


class SchedulerLostError(ConnectionError):
    """The connection to the Dask scheduler was lost while work ran on it (the scheduler stopped
    or the network failed, and the client could not reconnect); the message says what to do.

    Parameters
    ----------
    address : str
        The scheduler's address.
    reason : str, optional
        What showed the loss (an exception's name and message).
    """

    def __init__(self, address, reason=None):
        self.address = address
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"lost the connection to the Dask scheduler at {address} while the work ran{why}: the scheduler "
            f"stopped or cannot be reached from here; restart it and its workers (or check the network to it), "
            f"then run it again (a sweep or compare resumes from the grid points it finished)"
        )


class StoreUnreadableError(KernelInputError):
    """A Dask worker cannot open a kernel store that the client opened (:func:`read_store_rows`):
    its files are not found or not readable there (a path only on the client's machine, a file
    system the workers do not mount). Not retried.
    """


class WorkersLostError(RuntimeError):
    """Dask workers died more than :data:`MAX_RESENDS` times while new samples were predicted."""


class ViewMismatchError(ValueError):
    """New feature views whose names or column names are those of other fitted views or columns
    (views passed in another order, columns reordered or renamed): nothing is predicted.
    """


class ViewOrderWarning(UserWarning):
    """The new views' feature statistics look like the fitted views' in another order
    (:func:`lswmkc_dask.predict_math.order_evidence`); predicted as given.
    """


class UncheckedKernelWarning(UserWarning):
    """A check of the base kernels was skipped (e.g. positive semidefiniteness at large n)."""


# --- moved from the modules that raise them (one place for every exception class)


class EigenvectorMemoryError(MemoryError):
    """The positive eigenvectors of S would not fit the memory left (see psd_factor)."""


class WorkerMemoryError(EigenvectorMemoryError):
    """The gathered step's memory does not fit what is left under the worker's memory limit
    (raised before S is allocated); ``need``, ``left``, ``limit`` and ``resident`` in bytes
    (None where unknown).
    """

    def __init__(self, message, need=None, left=None, limit=None, resident=None):
        super().__init__(message)
        self.need, self.left, self.limit, self.resident = need, left, limit, resident


class ResidentRefusal(MemoryError):
    """The device cannot hold a resident fit; ``why`` gives the figures.

    Parameters
    ----------
    why : str
        Needed against free device memory, or cuSOLVER's size limit (the only argument,
        so that the exception crosses from a Dask worker whole).
    """

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why

    def __str__(self) -> str:
        return f"{self.why}: fit with the row blocks on the host (the eigen step alone on the device)"


class DeviceUnavailableError(RuntimeError):
    """``eig_device="cuda"`` was asked for where no GPU can run the gathered step."""


class DeviceFallbackWarning(RuntimeWarning):
    """The GPU cannot take this n (memory, solver limit): the gathered step ran on the CPU."""
