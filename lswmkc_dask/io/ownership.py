"""What marks an output as lswmkc's: the directory marker and the signature of files.

An output directory holds the marker ``.lswmkc-output`` (:func:`write_marker`,
:func:`marker_info`: ``kind``, ``version``, ``created``); a JSON file carries
``"written_by": "lswmkc-dask ..."`` (:func:`json_is_ours`) and a PNG a ``Software``
text chunk saying ``lswmkc-dask`` (:func:`png_is_ours`). Only what carries them is
ever replaced (:mod:`lswmkc_dask.io.guards`).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import warnings
from datetime import UTC, datetime
from pathlib import Path

from .._version import __version__
from ._lockfile import LOCK_NAME, ForeignOutputError

__all__ = [
    "MARKER",
    "SIGNATURE",
    "json_is_ours",
    "marker_info",
    "png_is_ours",
    "write_marker",
]

#: Name of the marker file in every output directory written by this package.
MARKER = ".lswmkc-output"
#: Kinds of output directory (the ``kind`` of the marker).
KINDS = ("fit", "sweep", "compare", "kernel-store", "plots")
#: Files of this package that do not make a directory "foreign" (marker, run lock).
OWN_FILES = (MARKER, LOCK_NAME)
_STORE_FORMAT_PREFIX = "lswmkc-kernel-store"


def utc_now():
    """The current time in UTC as ISO 8601 with a ``Z``, to the second (every timestamp lswmkc writes)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def signature():
    """The ``written_by`` value of this package's JSON files and the ``Software`` of its PNGs."""
    return f"{SIGNATURE} {__version__}"


#: Prefix of :func:`signature`: how this package's files are recognised.
SIGNATURE = "lswmkc-dask"


def json_is_ours(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a JSON object file whose ``written_by`` names this package."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(16 * 2**20))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and str(data.get("written_by", "")).startswith(SIGNATURE)


def png_is_ours(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a PNG file with a ``Software`` text chunk naming this package
    (read by Pillow, which comes with matplotlib, without decoding the image).

    Raises
    ------
    ModuleNotFoundError
        Pillow is not installed (with a message saying how to install it).
    """
    try:
        from PIL import Image
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"telling whether {path} is a PNG lswmkc wrote needs Pillow, which comes with "
                                  "matplotlib: pip install matplotlib (the 'plot' extra)", name="PIL") from exc
    try:
        with warnings.catch_warnings():  # a foreign PNG's size is no concern: its pixels are never decoded
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path, formats=["PNG"]) as image:
                software = image.info.get("Software")
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError):
        return False  # not a PNG, or a damaged one
    return isinstance(software, str) and software.startswith(SIGNATURE)


def write_marker(directory: str | os.PathLike[str], kind: str) -> None:
    """Write ``directory/.lswmkc-output`` (JSON ``{kind, version, created}``).

    Parameters
    ----------
    directory : str or Path
        An existing directory.
    kind : {"fit", "sweep", "compare", "kernel-store", "plots"}

    Raises
    ------
    ForeignOutputError
        The marker's name is taken by a symbolic link or a special file (never
        written through).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    text = json.dumps({"kind": kind, "version": __version__, "created": utc_now()}) + "\n"
    path = Path(directory) / MARKER
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EMLINK, errno.EISDIR, errno.ENXIO):
            raise
        fd = None
    try:
        if fd is None or not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ForeignOutputError(f"{path} is not a regular file (a symbolic link or a special file); lswmkc "
                                     "never writes through it: remove it yourself or choose another output")
        os.ftruncate(fd, 0)
        os.write(fd, text.encode())
    finally:
        if fd is not None:
            os.close(fd)


def marker_info(path: str | os.PathLike[str]) -> dict | None:
    """What lswmkc wrote at ``path``: the marker's content, or None if not its output.

    A directory with a ``.lswmkc-output`` marker gives the marker's JSON (``kind``,
    ``version``, ``created``); a kernel store written before the marker existed (a
    ``zarr.json`` whose attributes' ``format`` starts with ``lswmkc-kernel-store``)
    gives ``{"kind": "kernel-store", "format": ...}``. Anything else gives None.
    """
    path = Path(path)
    if not path.is_dir():
        return None
    marker = path / MARKER
    if marker.is_file():
        try:
            info = json.loads(marker.read_text())
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict) and info.get("kind") in KINDS:
            return info
    zmeta = path / "zarr.json"
    if zmeta.is_file():
        try:
            fmt = json.loads(zmeta.read_text()).get("attributes", {}).get("format")
        except (OSError, ValueError, AttributeError):
            fmt = None
        if isinstance(fmt, str) and fmt.startswith(_STORE_FORMAT_PREFIX):
            return {"kind": "kernel-store", "format": fmt}
    return None


def is_empty_dir(path):
    """An existing directory holding nothing but lswmkc's marker and lock files (regular files, not links)."""
    path = Path(path)
    return (path.is_dir() and not path.is_symlink()
            and all(n in OWN_FILES and (path / n).is_file() and not (path / n).is_symlink() for n in os.listdir(path)))
