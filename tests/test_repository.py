"""No binary artefact is tracked by git: the repository holds source, documents and the
small data sets the package ships (listed below with what uses them).

A tracked file is an artefact when its name says so (wheels, archives, arrays, stores,
compiled code, images), when its first bytes hold a NUL (git's own test of a binary
file), or when it is over :data:`MAX_BYTES`. Build outputs, runs and figures belong in
``.gitignore``; benchmark figures in the benchmark's output directory.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Names of build outputs, archives, arrays, stores, compiled code and images.
ARTEFACT_SUFFIXES = (
    ".whl", ".egg", ".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z",
    ".npz", ".npy", ".mat", ".h5", ".hdf5", ".pkl", ".pickle", ".parquet",
    ".so", ".dylib", ".dll", ".pyc", ".o", ".a", ".exe",
    ".png", ".jpg", ".jpeg", ".gif", ".pdf",
)
#: Any tracked file over this size is an artefact (the largest document is about 62 kB).
MAX_BYTES = 200 * 1024
#: Bytes read for the NUL test (as git reads for its own).
SNIFF_BYTES = 8000

#: Tracked artefacts, path -> what needs it. A path listed here that is no longer
#: tracked fails :func:`test_no_binary_artefact_is_tracked` (remove it from the list).
ALLOWED = {
    "lswmkc_dask/datasets/data/YALE_Kmatrix.mat": "the YALE base kernels of load_yale (package data, "
                                                  "the reference tests' input)",
    **{f"lswmkc_dask/datasets/data/mfeat-{view}.csv.gz": "a view of the Handwritten (mfeat) features of "
                                                          "load_handwritten (package data)"
       for view in ("fac", "fou", "kar", "mor", "pix", "zer")},
}


def artefact_reason(path: str, head: bytes, size: int) -> str | None:
    """Why the tracked file ``path`` is an artefact (its first bytes ``head``, ``size``
    bytes in all), or None for a source or text file within the size limit."""
    name = path.lower()
    if ".zarr/" in f"{name}/" or name.endswith(ARTEFACT_SUFFIXES):
        return "an artefact by its name"
    if b"\0" in head[:SNIFF_BYTES]:
        return "binary content (a NUL byte)"
    if size > MAX_BYTES:
        return f"{size} bytes, over {MAX_BYTES}"
    return None


def test_artefact_reason():
    """The test itself finds wheels, stores, arrays, binary content and large files."""
    text = b"def f():\n    return 1\n"
    assert artefact_reason("lswmkc_dask/fit.py", text, len(text)) is None
    assert artefact_reason("py_spy-0.4.0-py2.py3-none-manylinux_2_5_x86_64.whl", b"PK\3\4", 2_900_000)
    assert artefact_reason("results/yale.zarr/kernels/c/0/0/0", b"\1\2", 10)
    assert artefact_reason("yale.zarr", b"", 0)
    assert artefact_reason("out/K.npy", b"\x93NUMPY", 128)
    assert artefact_reason("data/blob", b"abc\0def", 7) == "binary content (a NUL byte)"
    assert artefact_reason("notes.txt", b"a" * 10, MAX_BYTES + 1).startswith(f"{MAX_BYTES + 1} bytes")
    assert artefact_reason("docs/figure.PNG", b"", 10)


def _tracked_files():
    """The files git tracks in this checkout (relative paths); skips outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout, or git is missing: {exc}")
    return [p for p in out.decode().split("\0") if p]


def test_no_binary_artefact_is_tracked():
    tracked = _tracked_files()
    found = {}
    for path in tracked:
        full = ROOT / path
        if not full.is_file() or full.is_symlink():
            continue
        with open(full, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
        reason = artefact_reason(path, head, full.stat().st_size)
        if reason and path not in ALLOWED:
            found[path] = reason
    assert not found, ("binary artefacts tracked by git (remove them with `git rm --cached`, add their pattern "
                       "to .gitignore, or list needed data in tests/test_repository.py ALLOWED): "
                       + "; ".join(f"{p}: {why}" for p, why in sorted(found.items())))
    stale = sorted(set(ALLOWED) - set(tracked))
    assert not stale, "ALLOWED lists files git no longer tracks: " + ", ".join(stale)
