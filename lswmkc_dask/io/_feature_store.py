"""What a kernel store prepared from feature views keeps for ``LSWMKC.predict``: the z-scored
training features of each view, their means and scales, the kernel and its parameters, the views'
names and column names (:data:`FEATURES`), written by :func:`lswmkc_dask.prepare`
(:func:`write_features`) and read checked (:func:`read_feature_views`).

Each array is one chunk with zarr's crc32c, its sha256 in the manifest (``features_sha256``, with
the attribute's); every file is read through :mod:`lswmkc_dask.io.integrity.files` (regular
files only, metadata bounded) and what it declares is compared before any of its data is read.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from ..kernels.features import KERNEL_KINDS, FeatureKernels, rbf_bandwidth
from . import integrity
from .integrity import StoreFileError, checked_group, is_local
from .integrity.files import file_problem
from .integrity.format import codecs_as_written, encoded_chunk_bytes

#: The group attribute of a store prepared from feature views (:class:`FeatureViews`): the kernel,
#: its parameters, the views' widths, rbf bandwidths, names and column names. Beside it, per view
#: ``p`` (of all input views, dropped ones included), the arrays :func:`feature_members` names:
#: ``train_features_p`` (n, d_p), the z-scored training features, and ``feature_moments_p`` (2, d_p),
#: their means and scales; the manifest's ``features_sha256`` holds the sha256 of each and of the
#: attribute. A store of precomputed kernels, or of an earlier version, has none.
FEATURES = "features"


def feature_members(p: int) -> tuple[str, str]:
    """The names of view ``p``'s arrays in a store: ``("train_features_p", "feature_moments_p")``."""
    return f"train_features_{p}", f"feature_moments_{p}"


@dataclass(frozen=True)
class FeatureViews:
    """What a store prepared from feature views keeps for ``LSWMKC.predict`` (:data:`FEATURES`).

    Attributes
    ----------
    kernel : {"rbf", "linear", "poly"}
    degree, coef0 : int, float
        The polynomial kernel's parameters (kept for every kernel).
    views, means, scales, bandwidths, names, columns
        As :class:`FeatureKernels` has them, for every input view: ``views[p]`` of shape (n, d_p)
        z-scored, ``means[p]`` and ``scales[p]`` of shape (d_p,), ``columns[p]`` ``[]`` unknown.
    """

    kernel: str
    degree: int
    coef0: float
    views: list
    means: list
    scales: list
    bandwidths: list
    names: list | None
    columns: list

    @property
    def kernel_params(self) -> dict | None:
        """``{"degree": ..., "coef0": ...}`` for "poly", else None (``LSWMKC(kernel_params=...)``)."""
        return {"degree": self.degree, "coef0": self.coef0} if self.kernel == "poly" else None


def _digest(value: Any) -> str:
    """The sha256 of an array's little-endian float64 bytes, or of a JSON value's canonical text."""
    if isinstance(value, np.ndarray):
        return integrity.statistics_sha256(value)
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_features(group: Any, source: FeatureKernels, attrs: dict) -> dict:
    """The arrays of :data:`FEATURES` written into the store's ``group``, its attribute put in ``attrs``;
    returns their sha256 (the manifest's ``features_sha256``). One chunk each, with its crc32c.
    """
    attrs[FEATURES] = {"kernel": source.kernel, "degree": int(source.degree), "coef0": float(source.coef0),
                       "widths": [int(v.shape[1]) for v in source.views],
                       "bandwidths": [float(b) for b in source.bandwidths],
                       "names": None if source.names is None else [str(x) for x in source.names],
                       "columns": [[str(c) for c in cols] for cols in source.columns]}
    digests = {FEATURES: _digest(attrs[FEATURES])}
    for p, (z, mu, sd) in enumerate(zip(source.views, source.means, source.scales)):
        for name, a in zip(feature_members(p), (z, np.stack([mu, sd]))):
            a = np.ascontiguousarray(a, dtype="<f8")
            group.create_array(name, data=a, chunks=a.shape, compressors=integrity.chunk_codecs(), fill_value=0.0,
                               config={"write_empty_chunks": True})
            digests[name] = _digest(a)
    return digests


def _attribute_problem(value: Any, n_views: int) -> str | None:
    """What is wrong with the structure of the :data:`FEATURES` attribute ``value`` (None: nothing)."""
    if not isinstance(value, dict):
        return f"is a JSON {type(value).__name__}, not an object"
    widths: Any
    cols: Any
    widths, bands, names, cols = (value.get(k) for k in ("widths", "bandwidths", "names", "columns"))

    def listed(x, each):
        return isinstance(x, list) and len(x) == n_views and all(map(each, x))

    checks = [
        (value.get("kernel") in KERNEL_KINDS, f"names the kernel {value.get('kernel')!r}"),
        (isinstance(value.get("degree"), int) and value["degree"] >= 1 and isinstance(value.get("coef0"), (int, float))
         and math.isfinite(value["coef0"]), f"has degree {value.get('degree')!r} and coef0 {value.get('coef0')!r}"),
        (listed(widths, lambda w: isinstance(w, int) and w >= 1), f"has widths {str(widths)[:80]}"),
        (listed(bands, lambda b: isinstance(b, (int, float)) and math.isfinite(b) and b >= 0),
         f"has bandwidths {str(bands)[:80]}"),
        (names is None or listed(names, lambda x: isinstance(x, str)), f"has names {str(names)[:80]}"),
        (listed(cols, lambda c: isinstance(c, list) and all(isinstance(x, str) for x in c))
         and isinstance(widths, list) and all(len(c) in (0, w) for c, w in zip(cols, widths)), "has column names"),
    ]
    bad = next((why for ok, why in checks if not ok), None)
    return None if bad is None else f"{bad}, not what `lswmkc prepare` writes for {n_views} views"


def _read_member(group: Any, root: Any, name: str, shape: tuple, digest: Any) -> tuple[np.ndarray | None, str | None]:
    """One array of :data:`FEATURES`: what it declares and its chunk file's size (exactly what `lswmkc
    prepare` writes) checked before its data is read, then its sha256 against the manifest's.
    """
    label = f"its feature views' {'training features' if name.startswith('train') else 'means and scales'} ({name!r})"
    try:
        arr = group[name]
    except KeyError:
        return None, f"{label} are missing: `lswmkc prepare` wrote them (the manifest holds their sha256)"
    declared = (tuple(arr.shape), tuple(arr.chunks), str(arr.dtype)) if isinstance(arr, zarr.Array) else None
    if declared != (shape, shape, "float64") or not codecs_as_written(arr):
        found = "a group" if declared is None else f"shape {declared[0]} in chunks {declared[1]} of {declared[2]}"
        return None, (f"{label} declare {found}, not the one float64 chunk {shape} with the little-endian bytes and "
                      "crc32c that `lswmkc prepare` writes")
    if root is not None:
        path, size = root / name / arr.metadata.encode_chunk_key((0, 0)), encoded_chunk_bytes(arr)
        problem = file_problem(path, size) or (None if not os.path.isfile(path) or os.path.getsize(path) == size
                                               else f"{path} holds {os.path.getsize(path)} bytes, not {size}")
        if problem:
            return None, f"{label}: {problem}"
    try:
        data = np.asarray(arr[...], dtype=np.float64)
    except StoreFileError as exc:
        return None, f"{label}: {exc.problem}"
    except Exception as exc:  # noqa: BLE001 - an unreadable member is damage, named here
        if "checksum" in str(exc).lower():
            return None, f"{label} fail their crc32c checksum (their bytes changed after they were written)"
        return None, f"{label} cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
    if _digest(data) != digest:
        return None, f"{label} are not what `lswmkc prepare` wrote (their sha256 is not the manifest's)"
    return data, None


def read_feature_views(location: integrity.StoreLocation, attrs: dict, n_samples: int,
                       n_views: int) -> tuple[FeatureViews | None, str | None]:
    """The :class:`FeatureViews` of a store prepared from feature views, and what is wrong with them.

    Each member read through :func:`lswmkc_dask.io.integrity.checked_group` (regular files only,
    metadata bounded), what it declares compared with the attribute before its data is read, its
    sha256 with the manifest's ``features_sha256``.

    Parameters
    ----------
    location : str, Path or zarr store
    attrs : dict
        The store's group attributes.
    n_samples, n_views : int
        n, and the number of input kernels (the statistics' ``n_kernels_in``): one view each.

    Returns
    -------
    views : FeatureViews or None
        None when absent (a store of precomputed kernels, or of an earlier version) or damaged.
    problem : str or None
        Naming the member: removed (the manifest records it), not a regular file, declaring
        another shape, its sha256 not the manifest's, a bandwidth not that of the training features.
    """
    manifest = attrs.get("manifest")
    digests = manifest.get("features_sha256") if isinstance(manifest, dict) else None
    value, what = attrs.get(FEATURES), f"its feature views' attribute ({FEATURES!r})"
    if value is None:
        return None, None if digests is None else f"{what} is missing: `lswmkc prepare` wrote it (the manifest holds its sha256)"
    if not isinstance(digests, dict) or digests.get(FEATURES) != _digest(value):
        return None, f"{what} is not what `lswmkc prepare` wrote (its sha256 is not the manifest's)"
    problem = _attribute_problem(value, n_views)
    if problem:
        return None, f"{what} {problem}"
    try:
        group = checked_group(location, tuple(name for p in range(n_views) for name in feature_members(p)))
    except StoreFileError as exc:
        return None, f"its feature views: {exc.problem}"
    root = Path(os.path.abspath(os.fspath(location))) if is_local(location) else None
    views: list[np.ndarray] = []
    moments: list[np.ndarray] = []
    for p, (width, band) in enumerate(zip(value["widths"], value["bandwidths"])):
        for name, shape, out in zip(feature_members(p), ((n_samples, width), (2, width)), (views, moments)):
            data, problem = _read_member(group, root, name, shape, digests.get(name))
            if data is None:
                return None, problem
            out.append(data)
        z = views[p]
        if not (np.all(np.isfinite(z)) and np.all(np.isfinite(moments[p])) and np.all(moments[p][1] > 0)):
            return None, (f"its feature view {p} holds NaN/Inf training features, means or scales, or a scale not "
                          "above 0")
        if not math.isclose(rbf_bandwidth(z), band, rel_tol=1e-9, abs_tol=1e-12):  # as FeatureKernels computes it
            return None, f"{what} gives view {p} a bandwidth of {band!r}, not that of its training features"
    return FeatureViews(value["kernel"], value["degree"], float(value["coef0"]), views, [m[0] for m in moments],
                        [m[1] for m in moments], [float(b) for b in value["bandwidths"]], value["names"],
                        value["columns"]), None


def _verify_check(location: Any, attrs: dict, n_samples: int, n_views: int) -> str | None:
    """What ``lswmkc verify`` reports of a store's feature views (None: absent or intact)."""
    manifest = attrs.get("manifest")
    if not isinstance(manifest, dict) or "features_sha256" not in manifest:
        return None
    return read_feature_views(location, attrs, n_samples, n_views)[1]


integrity.read.MEMBER_CHECKS["training feature views (shapes, sha256, bandwidths)"] = _verify_check
