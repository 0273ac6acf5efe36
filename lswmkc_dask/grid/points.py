"""What a sweep and a comparison share: where they run, and their resumable directory.

A grid (:func:`lswmkc_dask.sweep`, :func:`lswmkc_dask.grid.compare.compare`) writes one run
directory per grid point under ``OUTPUT/runs/`` and resumes where it stopped:
:func:`open_grid_directory` locks the directory and, on resume, refuses other settings and
other data (:func:`input_fingerprint`); :func:`write_table_files` writes its table;
:class:`Where` says where it runs (:func:`lswmkc_dask.engine.cluster.execution`).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OtherDataError, Param, ParameterError, with_message
from ..io.output import atomic_path, marker_info
from ..io.results import read_json
from ..io.run import RunDirectory
from ..report.record import labels_csv, to_json_ready

#: Values of settings that a directory written without them has (``repeats`` is recorded
#: only above 1, so a directory of an older version, or of repeats = 1, reads as 1).
CONFIG_DEFAULTS = {"repeats": 1}


def _setting_changes(old, new, keys):
    """``{key: (old value, new value)}`` of the settings ``keys`` that differ (an absent key read as
    its :data:`CONFIG_DEFAULTS` value, else None).
    """
    values = {k: (old.get(k, CONFIG_DEFAULTS.get(k)), new.get(k, CONFIG_DEFAULTS.get(k))) for k in keys}
    return {k: (a, b) for k, (a, b) in values.items() if a != b}


def _sha256_text(text):
    return hashlib.sha256(text.encode()).hexdigest()


def input_fingerprint(store: Any, labels: Any = None) -> dict:
    """A content fingerprint of a run's input: the preprocessed kernels and the labels.

    The sha256 of the store's manifest (shape, chunks, dtype, every chunk's crc32c;
    :func:`lswmkc_dask.io.integrity.make_manifest`), which costs no read, else of its values
    read block by block. The store's path plays no part; its ``block_rows`` does.

    Parameters
    ----------
    store : KernelStore
        On disk or in memory (an array, ``.mat`` or ``.npz`` input is preprocessed
        into one; its manifest is of the preprocessed kernels).
    labels : array_like of shape (n,), optional
        Ground truth used for the metrics.

    Returns
    -------
    dict
        ``kernels_sha256`` (hex), ``digest_of`` (``"manifest"`` or ``"values"``),
        ``shape`` ([m, n, n]), ``block_rows``, ``dtype``, ``labels_sha256`` (hex of
        the ``labels_true.csv`` text, None without labels).

    Raises
    ------
    KernelInputError
        A damaged chunk of a store without manifest (while reading it).
    """
    m, n = int(store.n_kernels), int(store.n_samples)
    dtype = "float32" if store.itemsize == 4 else "float64"
    manifest = store.attrs.get("manifest")  # (a stack built on a GPU has none: its values are hashed)
    if isinstance(manifest, dict) and manifest.get("chunk_crc32c"):
        keys = ("shape", "chunks", "chunk_keys", "chunk_crc32c")
        text = json.dumps({"dtype": dtype, **{k: manifest.get(k) for k in keys}}, sort_keys=True)
        digest, of = _sha256_text(text), "manifest"
    else:
        h = hashlib.sha256(json.dumps({"dtype": dtype, "shape": [m, n, n]}).encode())
        for start, stop in store.blocks():
            h.update(np.ascontiguousarray(store.read_rows(start, stop), dtype="<f8").tobytes())
        digest, of = h.hexdigest(), "values"
    return {
        "kernels_sha256": digest,
        "digest_of": of,
        "shape": [m, n, n],
        "block_rows": int(store.block_rows),
        "dtype": dtype,
        "labels_sha256": None if labels is None else _sha256_text(labels_csv(labels, header="true_label")),
    }


def _check_same_input(directory, old, new, verb):
    """Raise :class:`OtherDataError` unless the recorded settings ``old`` and this run's ``new`` have the
    same ``input`` (:func:`input_fingerprint`); the message gives both fingerprints and where the data came from.
    """
    was, now = old.get("input"), new.get("input") or {}
    if not isinstance(was, dict):
        raise with_message(
            OtherDataError, "{} records no fingerprint of the data it was {} on (a pre-release version of lswmkc "
            "wrote it): its results cannot be checked against this input; use another output directory, or "
            "{} to replace it", directory, verb, Param("overwrite", True),
        )
    then_src, now_src = old.get("data") or "its input", new.get("data") or "the input"
    what = []
    if was.get("kernels_sha256") != now.get("kernels_sha256"):
        def size(d):
            shape = d.get("shape")
            return f"{shape[0]} kernels x {shape[1]} samples" if isinstance(shape, list) and len(shape) == 3 else "?"

        text = (f"kernel fingerprint {str(was.get('kernels_sha256'))[:12]} of {then_src} then ({size(was)}), "
                f"{str(now.get('kernels_sha256'))[:12]} of {now_src} now ({size(now)})")
        if was.get("shape") == now.get("shape") and was.get("block_rows") != now.get("block_rows"):
            text += (f"; the same kernels in chunks of another size ({was.get('block_rows')} rows then, "
                     f"{now.get('block_rows')} now) count as other data too")
        what.append(text)
    if was.get("labels_sha256") != now.get("labels_sha256"):
        def lab(d):
            return "no labels" if d.get("labels_sha256") is None else f"label fingerprint {d['labels_sha256'][:12]}"
        what.append(f"{lab(was)} then, {lab(now)} now")
    if what:
        raise with_message(
            OtherDataError, "{} was {} on other data ({}): its results would be mixed with this run's; use another "
            "output directory, or {} to replace it", directory, verb, "; ".join(what), Param("overwrite", True),
        )


def input_paths(X: Any) -> list:
    """The input of a grid as paths (an output holding one is never replaced).

    Parameters
    ----------
    X : object
        A grid's ``X``: a path, or an object with a ``location`` (a kernel store).

    Returns
    -------
    list
        Its local path, or nothing (a URL, arrays).
    """
    location = X if isinstance(X, (str, os.PathLike)) else getattr(X, "location", None)
    return [location] if isinstance(location, (str, os.PathLike)) and "://" not in str(location) else []


@contextlib.contextmanager
def open_grid_directory(
    output: str | Path,
    *,
    kind: str,
    noun: str,
    verb: str,
    resume_file: str,
    config: dict,
    config_keys: Sequence[str],
    store: Any,
    labels: Any = None,
    overwrite: bool = False,
    merge: Callable[[dict, dict], dict] | None = None,
) -> Iterator[tuple[RunDirectory, dict]]:
    """``with open_grid_directory(...) as (target, config):`` a grid's directory locked and set up
    (fresh, replaced, or resumed on the same data) for the body, closed after it.

    Parameters
    ----------
    output : str or Path
    kind : str
        "sweep" or "compare".
    noun, verb : str
        For the messages: "sweep"/"swept", "comparison"/"compared".
    resume_file : str
        The settings file (``sweep.json``, ``compare.json``), written from ``config``: this
        call's settings, JSON-ready, with the data's fingerprint under ``"input"``.
    config, config_keys : dict, sequence of str
        The settings, and those that must agree to resume.
    store : KernelStore
        The kernels (a store on disk is an input the directory must not be inside).
    labels : ndarray of shape (n,), optional
        Written as ``labels_true.csv``.
    overwrite : bool
        Replace a directory this tool wrote (only when the first new result is ready).
    merge : callable, optional
        ``merge(old, new) -> config`` on resume (a comparison's grids may grow).

    Returns
    -------
    (RunDirectory, dict)
        The locked directory (``state`` "fresh", "replace" or "resume"; closed when the body
        ends, :meth:`lswmkc_dask.io.run.RunDirectory.close`) and the config in force.

    Raises
    ------
    ValueError
        The directory holds a grid with other settings (the message gives them).
    OtherDataError
        (a ValueError) it holds a grid of other data.
    FileExistsError
        It is not a directory of this kind, or another process runs in it.
    """
    out = Path(output)
    with RunDirectory(out, kind=kind, overwrite=overwrite,
                      inputs=[] if store.in_memory else [store.location]) as target:
        merged = False
        if target.state == "resume" and not (out / resume_file).is_file():
            # A run killed while it set the directory up (the marker written, the settings file
            # not yet renamed into place) has no result: it is started again, not refused.
            finished = [p for p in (out / "runs").glob("*") if not p.name.startswith(".")]  # (none: no directory)
            if (marker_info(out) or {}).get("kind") != kind or finished:
                raise with_message(
                    FileExistsError, "output {} exists and is not a {} directory (pass {} to replace it)", out, kind,
                    Param("overwrite", True, hint="or"),
                )
        elif target.state == "resume":
            old = read_json(out / resume_file)
            diff = _setting_changes(old, config, config_keys)
            if diff:
                raise ParameterError(
                    "{} holds a {} with other settings {} (old, new); use another directory or {}", out, noun, diff,
                    Param("overwrite", True),
                )
            _check_same_input(out, old, config, verb)
            if merge is not None:
                config, merged = merge(old, config), True
        target.start(
            files={resume_file: json.dumps(config, indent=2) + "\n",
                   "labels_true.csv": None if labels is None else labels_csv(labels, header="true_label")},
            dirs=["runs"],
        )
        if target.state == "resume":
            if merged:
                with atomic_path(out / resume_file, overwrite=True) as tmp:
                    tmp.write_text(json.dumps(config, indent=2) + "\n")
            target.remove_temporaries("runs")  # left by a process killed outright (the lock is ours)
        yield target, config


def write_table_files(out: Path, stem: str, data: dict, columns: Sequence[str]) -> None:
    """Write a grid's table as ``stem.json`` (``data``, JSON-ready) and ``stem.csv`` (``data["rows"]``), atomically.

    Parameters
    ----------
    out : Path
        The grid's directory.
    stem : str
        ``"summary"`` (a sweep) or ``"comparison"``.
    data : dict
        What the JSON holds; its ``"rows"`` (list of dict) are the CSV's rows.
    columns : sequence of str
        The CSV's columns, in order (a row without one gets an empty cell).
    """
    with atomic_path(out / f"{stem}.json", overwrite=True) as tmp:
        tmp.write_text(json.dumps(to_json_ready(data), indent=2) + "\n")
    with atomic_path(out / f"{stem}.csv", overwrite=True) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns))
        w.writeheader()
        w.writerows([{c: r.get(c) for c in columns} for r in data["rows"]])
