"""The JSON and label files of lswmkc's fit and sweep directories, read back through one guard.

Such a directory (read by ``lswmkc plot``, ``lswmkc table``, a resumed sweep) may come from
elsewhere: only a regular file is opened (:func:`~lswmkc_dask.io.integrity.files.open_regular`), a JSON
file must be one object with the entries the readers index (:func:`report_problem`,
:func:`summary_problem`, :func:`sweep_config_problem`), a label file one label a row. Every
refusal is a :class:`ResultFileError` (a ``ValueError``) naming the file and what is wrong.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ResultFileError
from .integrity.files import open_regular, parse_json
from .labels import LABEL_HEADERS
from .npz import damaged


def read_text(path: str | os.PathLike[str]) -> str:
    """The text of the regular file ``path`` (UTF-8), never waiting on a FIFO or a device.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ResultFileError
        ``path`` is a FIFO, a device, a socket or a directory, cannot be read, or is
        not UTF-8 text.
    """
    with open_regular(path, ResultFileError) as fh:
        try:
            return fh.read().decode("utf-8")
        except OSError as exc:
            raise ResultFileError(f"{path} cannot be read ({exc.strerror or exc})") from None
        except UnicodeDecodeError as exc:
            raise _refusal(path, f"is not UTF-8 text (byte {exc.start})") from None


def _refusal(path, why):
    return ResultFileError(f"{path} {why}; {damaged(ResultFileError)}")


def read_json(path: str | os.PathLike[str], check: Callable[[dict], str | None] | None = None) -> dict:
    """The JSON object in the regular file ``path``, checked.

    Parameters
    ----------
    path : str or Path
    check : callable, optional
        ``check(obj) -> str or None``: what is wrong with the object (None: nothing),
        e.g. :func:`report_problem`.

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ResultFileError
        Not a regular file, not JSON, nested too deeply, not one object
        (:func:`~lswmkc_dask.io.integrity.files.parse_json`), or an object that ``check``
        refuses; the message names the file.
    """
    obj = parse_json(read_text(path), lambda why: _refusal(path, why), obj=True)
    why = check(obj) if check is not None else None
    if why:
        raise _refusal(path, why)
    return obj


def read_labels(path: str | os.PathLike[str], n: int | None = None, counted_in: Any = None) -> np.ndarray:
    """The labels of a ``sample,predicted_label`` / ``sample,true_label`` file (or the
    older ``sample,label``), in sample order; ints where integral.

    Parameters
    ----------
    path : str or Path
    n : int, optional
        The number of samples expected.
    counted_in : str or Path, optional
        The file that says ``n`` (named in the refusal).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ResultFileError
        Not a regular file, not text, or (with ``n``) not ``n`` labels.
    """
    try:
        rows = list(csv.reader(io.StringIO(read_text(path), newline="")))
    except csv.Error as exc:
        raise _refusal(path, f"is not a CSV file ({exc})") from None
    if rows and rows[0] and (rows[0][-1].strip().lower() in LABEL_HEADERS or rows[0][0].strip().lower() == "sample"):
        rows = rows[1:]
    rows = [r for r in rows if r]
    if rows and len(rows[0]) > 1:
        with contextlib.suppress(ValueError):  # a first cell that is not a sample number: in the file's order
            rows.sort(key=lambda r: int(r[0]))
    if n is not None and len(rows) != n:
        where = f", but {counted_in} says {n} samples" if counted_in is not None else f", not {n}"
        raise _refusal(path, f"holds {len(rows)} label{'s' if len(rows) != 1 else ''}{where}")
    vals = [r[-1].strip() for r in rows]
    for cast in (int, float):
        with contextlib.suppress(ValueError, OverflowError):
            return np.asarray([cast(v) for v in vals])
    return np.asarray(vals)


# --- what the readers index in each JSON file -------------------------------------------------

def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite(v):
    return _number(v) and math.isfinite(v)


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _optional(test):
    return lambda v: v is None or test(v)


def _each(test, kind=list):
    """A test of a list (or, ``kind`` dict, an object) whose items (values) each pass ``test``."""
    return lambda v: isinstance(v, kind) and all(test(x) for x in (v.values() if kind is dict else v))


def _gamma(v):
    return v == "auto" or _finite(v)


_NUMBERS = _each(_optional(_number))
_SCORES = _each(_optional(_number), dict)
_METRICS = _each(_SCORES, dict)


def _short(value):
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


#: ``required`` of an entry that may be left out but, when there, is never null.
ABSENT_OK = "absent"


def _entries_problem(obj, where, checks):
    """What is wrong with the entries of ``obj`` (``checks``: key -> (test, what, required)), or None.

    ``required`` True: present (null only where ``test`` takes it); False: may be left out or null;
    :data:`ABSENT_OK`: may be left out, not null.
    """
    for key, (test, what, required) in checks.items():
        if key not in obj:
            if required is True:
                return f"has no {where}{key!r} entry ({what})"
            continue
        if obj[key] is None and required is False:
            continue
        if not test(obj[key]):
            return f"has {where}{key!r} = {_short(obj[key])}, not {what}"
    return None


_PARAMS = {"alpha": (_finite, "a number", True), "n_neighbors": (_int, "an integer", True),
           "n_clusters": (_optional(_int), "an integer", False), "gamma": (_gamma, '"auto" or a number', ABSENT_OK)}
_RUN_K = {"n_clusters": (_optional(_int), "an integer", False), "score": (_optional(_number), "a number", False)}
_K_ENTRY = {"metrics": (_METRICS, "an object of metrics", False),
            "label_free": (_SCORES, "an object of scores", False)}
_REPORT = {
    "params": (lambda v: isinstance(v, dict), "an object", True),
    "n_samples": (_int, "an integer", False),
    **dict.fromkeys(("objective", "kstar_change", "kernel_weights"), (_NUMBERS, "a list of numbers", False)),
    "kernel_names": (_each(lambda x: isinstance(x, str)), "a list of names", False),
    "by_n_clusters": (_each(lambda v: isinstance(v, dict), dict), "an object of objects", False),
    "n_clusters_selected": (lambda v: isinstance(v, dict), "an object", False),
    **_K_ENTRY,
}


def report_problem(report: dict) -> str | None:
    """What is wrong with a fit's ``report.json`` (the entries the readers use), or None.

    ``params`` with a number ``alpha``, an integer ``n_neighbors``, an integer (or
    null) ``n_clusters`` and ``gamma`` ``"auto"`` or a number; the per-iteration lists
    of numbers; ``metrics``, ``label_free`` and every ``by_n_clusters`` entry of the
    shape lswmkc writes.
    """
    why = _entries_problem(report, "", _REPORT) or _entries_problem(report["params"], "params ", _PARAMS)
    why = why or _entries_problem(report.get("n_clusters_selected") or {}, "n_clusters_selected ", _RUN_K)
    if why:
        return why
    for k, entry in (report.get("by_n_clusters") or {}).items():
        if not k.lstrip("-").isdigit():
            return f"has by_n_clusters key {k!r}, not an integer k"
        why = why or _entries_problem(entry, f"by_n_clusters[{k}] ", _K_ENTRY)
    return why


_POINT = {"alpha": (_finite, "a number", True), "n_neighbors": (_int, "an integer", True),
          "gamma": (_gamma, '"auto" or a number', ABSENT_OK)}
_ROW = {**_POINT, "n_clusters": (_int, "an integer", True)}
_SCORED = {"alpha": (_finite, "a number", True), "score": (_optional(_number), "a number", True),
           "n_clusters": (_optional(_int), "an integer", False)}
_CONSENSUS = {**_SCORED, "score": (_optional(_number), "a number", False)}
_SELECTED = {**_POINT, "n_clusters": (_optional(_int), "an integer", True), "score": (_number, "a number", True),
             "near_ties": (_each(lambda v: isinstance(v, dict)), "a list of objects", False),
             **dict.fromkeys(("consensus", "k_candidates", "n_clusters_scores"),
                             (_optional(lambda v: isinstance(v, dict)), "an object", False))}


def summary_problem(summary: dict) -> str | None:
    """What is wrong with a sweep's ``summary.json`` (its rows and its choice), or None.

    Every row an object with a number ``alpha``, integers ``n_neighbors`` and
    ``n_clusters``; ``selected`` null or an object with the point, its ``score`` and
    k, its near-ties and consensus each with ``alpha`` and ``score``.
    """
    rows = summary.get("rows", [])
    if not isinstance(rows, list):
        return f"has 'rows' = {_short(rows)}, not a list"
    for i, row in enumerate(rows):
        why = _entries_problem(row, f"rows[{i}] ", _ROW) if isinstance(row, dict) else f"has rows[{i}], not an object"
        if why:
            return why
    chosen = summary.get("selected")
    if chosen is None:
        return None
    if not isinstance(chosen, dict):
        return f"has 'selected' = {_short(chosen)}, not an object"
    why = _entries_problem(chosen, "selected ", _SELECTED)
    for i, tie in enumerate(chosen.get("near_ties") or []):
        why = why or _entries_problem(tie, f"selected near_ties[{i}] ", _SCORED)
    return why or _entries_problem(chosen.get("consensus") or {}, "selected consensus ", _CONSENSUS)


_CONFIG = {"n_samples": (_int, "an integer", False), "random_state": (_optional(_int), "an integer", False),
           "kernel_names": (_each(lambda x: isinstance(x, str)), "a list of names", False),
           "data": (_optional(lambda v: isinstance(v, str)), "a name", False)}


def sweep_config_problem(config: dict) -> str | None:
    """What is wrong with a sweep's ``sweep.json`` (the entries the readers use), or None."""
    return _entries_problem(config, "", _CONFIG)
