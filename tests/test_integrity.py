"""A damaged kernel store is refused, never fitted silently (chunk checksums, manifest, verify).

`lswmkc fit` and `lswmkc verify` of a YALE store run in this process through ``cli.main``
(what the script calls; a store this small is fitted in this process, no cluster), the
fit on a cluster as a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import zarr
from _helpers import lswmkc, lswmkc_main

from lswmkc_dask import LSWMKC, FeatureKernels, KernelInputError, open_store, prepare
from lswmkc_dask.datasets import load_handwritten
from lswmkc_dask.io import (
    STORE_FORMAT,
    read_store_rows,
    verify_store,
)

OLD_FORMAT = "lswmkc-kernel-store/1"

pytestmark = pytest.mark.timeout(300)

CHUNK2 = "kernels/c/0/2/0"  # rows 80-119 with block_rows=40


@pytest.fixture
def store(yale, tmp_path):
    """A fresh YALE store on disk, 5 chunks of 40 rows."""
    kernels, labels = yale
    path = tmp_path / "yale.zarr"
    prepare(kernels, path, labels=labels, block_rows=40)
    return path


def _flip_byte(path, chunk, offset=1000):
    with open(path / chunk, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([b[0] ^ 0xFF]))


def _write_nan(path, p=2, i=85, j=3):
    """A NaN written through zarr: the chunk's checksum is valid."""
    zarr.open_array(str(path), path="kernels", mode="r+")[p, i, j] = np.nan


def _assert_cli_error(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "lswmkc: error: kernel store" in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


# ------------------------------------------------------------------- clean store
def test_clean_store_has_checksums_and_manifest_and_verifies(store, yale):
    group = zarr.open_group(str(store), mode="r")
    attrs = dict(group.attrs)
    assert attrs["format"] == STORE_FORMAT == "lswmkc-kernel-store/2"
    assert [type(c).__name__ for c in group["kernels"].metadata.codecs] == ["BytesCodec", "Crc32cCodec"]
    man = attrs["manifest"]
    assert man["shape"] == [5, 165, 165] and man["chunks"] == [5, 40, 165] and man["chunk_grid"] == [1, 5, 1]
    assert man["chunk_keys"] == [f"kernels/c/0/{i}/0" for i in range(5)]
    assert man["chunk_rows"] == [[0, 40], [40, 80], [80, 120], [120, 160], [160, 165]]
    for key, crc in zip(man["chunk_keys"], man["chunk_crc32c"]):  # the manifest holds the chunks' own crc32c
        assert int.from_bytes((store / key).read_bytes()[-4:], "little") == crc
    assert verify_store(store) == []
    proc = lswmkc_main("verify", store, "--output", store.parent / "verify.json")
    assert proc.returncode == 0
    assert "OK, n=165 samples, m=5 kernels, 5 chunks of 40 rows" in proc.stdout
    report = json.loads((store.parent / "verify.json").read_text())
    assert report["ok"] and report["problems"] == [] and report["n_chunks"] == 5 and "symmetry" in report["checks"]
    np.testing.assert_array_equal(open_store(store).read_rows(0, 165).shape, (5, 165, 165))


def test_feature_store_verifies_clean(tmp_path):
    """Gaussian kernels built blockwise are symmetric only to rounding: no false alarm."""
    views, labels = load_handwritten()
    path = tmp_path / "hw.zarr"
    prepare(FeatureKernels([v[:400] for v in views], "gaussian"), path, labels=labels[:400], block_rows=48)
    assert verify_store(path) == []


# ------------------------------------------------------------------ missing chunk
def test_missing_chunk_refused_at_open_fit_and_cli(store):
    os.remove(store / CHUNK2)
    with pytest.raises(KernelInputError, match=r"rows 80-119 of all kernels \(kernels/c/0/2/0\) is missing") as err:
        open_store(store)
    assert str(store) in str(err.value) and "lswmkc prepare" in str(err.value)
    with pytest.raises(KernelInputError, match="rows 80-119"):
        LSWMKC(15, alpha=8).fit(store)
    with pytest.raises(KernelInputError, match="rows 80-119"):
        LSWMKC(15, alpha=8).fit(str(store))
    _assert_cli_error(lswmkc_main("fit", store, "--alpha", 8), "rows 80-119", CHUNK2)
    proc = lswmkc_main("verify", store)
    assert proc.returncode == 2 and "DAMAGED, 1 problem" in proc.stdout and "rows 80-119" in proc.stdout
    assert verify_store(store) == [f"the chunk of rows 80-119 of all kernels ({CHUNK2}) is missing"]


def test_several_missing_chunks_all_named(store):
    os.remove(store / "kernels/c/0/0/0")
    os.remove(store / "kernels/c/0/4/0")
    with pytest.raises(KernelInputError, match=r"2 chunks are missing: rows 0-39 .*rows 160-164"):
        open_store(store)


def test_chunk_removed_after_open_refused_at_read(store):
    opened = open_store(store)
    os.remove(store / CHUNK2)
    with pytest.raises(KernelInputError, match=r"rows 80-119 of all kernels \(kernels/c/0/2/0\) is missing"):
        opened.read_rows(0, 165)
    assert read_store_rows(store, 0, 80).shape == (5, 80, 165)  # the intact chunks still read


def test_missing_chunk_in_fsspec_store(yale):
    import fsspec

    kernels, labels = yale
    url = "memory://lswmkc-integrity/yale.zarr"
    try:
        prepare(kernels, url, labels=labels, block_rows=40)
        assert open_store(url).n_samples == 165
        fsspec.filesystem("memory").rm(f"/lswmkc-integrity/yale.zarr/{CHUNK2}")
        with pytest.raises(KernelInputError, match=r"rows 80-119 of all kernels \(kernels/c/0/2/0\) is missing"):
            open_store(url)
    finally:
        fsspec.filesystem("memory").rm("/lswmkc-integrity", recursive=True)


# ------------------------------------------------------------------ flipped bytes
def test_flipped_bytes_refused_in_process_and_cli(store):
    _flip_byte(store, "kernels/c/0/1/0")
    open_store(store)  # opening reads no chunk data
    with pytest.raises(KernelInputError, match=r"rows 40-79 of all kernels \(kernels/c/0/1/0\) fails its crc32c"):
        LSWMKC(15, alpha=8).fit(store)
    with pytest.raises(KernelInputError, match="fails its crc32c checksum"):
        read_store_rows(store, 40, 80)
    _assert_cli_error(lswmkc_main("fit", store, "--alpha", 8), "rows 40-79", "crc32c")
    proc = lswmkc_main("verify", store)
    assert proc.returncode == 2 and "rows 40-79 of all kernels (kernels/c/0/1/0) fails its crc32c" in proc.stdout


def test_truncated_chunk_refused(store):
    data = (store / CHUNK2).read_bytes()
    (store / CHUNK2).write_bytes(data[: len(data) // 2])
    with pytest.raises(KernelInputError, match="rows 80-119"):
        read_store_rows(store, 0, 165)
    assert any("rows 80-119" in p for p in verify_store(store))


def test_chunk_of_another_size_with_a_valid_checksum_refused(store):
    """zarr's codec accepts the checksum but cannot decode the chunk: named as truncated or replaced."""
    import google_crc32c

    body = np.zeros(10).tobytes()
    (store / CHUNK2).write_bytes(body + int(google_crc32c.value(body)).to_bytes(4, "little"))
    with pytest.raises(KernelInputError, match=r"rows 80-119 of all kernels \(kernels/c/0/2/0\) .*truncated or replaced"):
        read_store_rows(store, 0, 165)
    assert any("rows 80-119" in p and "truncated or replaced" in p for p in verify_store(store))
    np.testing.assert_array_equal(read_store_rows(store, 5, 70), read_store_rows(store, 0, 80)[:, 5:70])


@pytest.mark.parametrize("damage", ["flip", "nan", "missing-after-open"])
@pytest.mark.parametrize("cache", [True, False])
def test_damage_reaches_the_user_through_dask(store, client, damage, cache):
    """Read on the workers (cached blocks or BlockRef per iteration): the error is a KernelInputError."""
    opened = open_store(store)
    if damage == "flip":
        _flip_byte(store, CHUNK2)
        expected = r"rows 80-119 of all kernels \(kernels/c/0/2/0\) fails its crc32c checksum"
    elif damage == "nan":
        _write_nan(store)
        expected = r"kernel 2 has 1 non-finite value \(NaN\) in row 85"
    else:
        os.remove(store / CHUNK2)
        expected = r"rows 80-119 of all kernels \(kernels/c/0/2/0\) is missing"
    with pytest.raises(KernelInputError, match=expected) as err:
        LSWMKC(15, alpha=8, client=client, max_iter=2, min_iter=2, cache_kernels=cache).fit(opened)
    assert str(store) in str(err.value)


def test_flipped_bytes_refused_by_cli_on_a_cluster(store):
    _flip_byte(store, CHUNK2)
    proc = lswmkc("fit", store, "--alpha", 8, "--max-iter", 2, "--n-workers", 1, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("lswmkc: error: kernel store") and "rows 80-119" in last and "crc32c" in last


# -------------------------------------------------------------- NaN with valid checksum
def test_nan_written_via_zarr_refused(store):
    _write_nan(store)
    with pytest.raises(KernelInputError, match=r"kernel 2 has 1 non-finite value \(NaN\) in row 85 "
                                               r"\(kernels/c/0/2/0\), the first at row 85, column 3"):
        LSWMKC(15, alpha=8).fit(store)
    _assert_cli_error(lswmkc_main("fit", store, "--alpha", 8), "kernel 2", "row 85", "NaN")
    problems = verify_store(store)
    assert any("kernel 2 has 1 non-finite value (NaN) in row 85" in p for p in problems)
    assert any("is not the chunk `lswmkc prepare` wrote" in p for p in problems)  # manifest crc differs
    proc = lswmkc_main("verify", store)
    assert proc.returncode == 2 and "kernel 2" in proc.stdout and "NaN" in proc.stdout


# ---------------------------------------------------- values changed with a valid checksum
def test_verify_finds_asymmetry_diagonal_and_replaced_chunks(store):
    arr = zarr.open_array(str(store), path="kernels", mode="r+")
    arr[1, 85, 3] = arr[1, 85, 3] + 1e-9  # one entry, far below any visible change of a fit
    problems = verify_store(store)
    assert any(p.startswith("kernel 1 is not symmetric: blocks rows 0-39 vs 80-119") for p in problems), problems
    assert not any(p.startswith(("kernel 0 ", "kernel 2 ", "kernel 3 ", "kernel 4 ")) for p in problems), problems

    arr[3, 130, 130] = 0.5  # a diagonal entry
    with pytest.raises(KernelInputError, match=r"kernel 3 has diagonal entries other than 1 in row 130"):
        read_store_rows(store, 120, 160)


def test_chunk_copied_over_another_refused(store):
    shutil.copy(store / "kernels/c/0/1/0", store / CHUNK2)  # a valid chunk in the wrong place
    with pytest.raises(KernelInputError, match=r"all kernels have diagonal entries other than 1 in rows 80-119"):
        LSWMKC(15, alpha=8).fit(store)
    problems = verify_store(store)
    assert any("rows 80-119" in p and "is not the chunk `lswmkc prepare` wrote" in p for p in problems)


def test_store_without_manifest_refused(store):
    group = zarr.open_group(str(store), mode="r+")
    attrs = dict(group.attrs)
    del attrs["manifest"]
    group.attrs.clear()
    group.attrs.update(attrs)
    with pytest.raises(KernelInputError, match="manifest"):
        open_store(store)


def test_store_without_format_refused_alike_at_open_read_and_verify(store):
    """No format attribute (what an interrupted prepare leaves): one message at open and read, named in verify."""
    group = zarr.open_group(str(store), mode="r+")
    attrs = {k: v for k, v in group.attrs.items() if k != "format"}
    group.attrs.clear()
    group.attrs.update(attrs)
    expected = r"is damaged: format None is not .*; an interrupted `lswmkc prepare` leaves no format attribute"
    with pytest.raises(KernelInputError, match=expected) as opened:
        open_store(store)
    with pytest.raises(KernelInputError, match=expected) as read:
        read_store_rows(store, 0, 40)
    assert str(opened.value) == str(read.value)
    assert "an interrupted `lswmkc prepare` leaves no format attribute" in verify_store(store)[0]


def _drop_manifest(man):
    return None


def _keys_not_a_list(man):
    return {**man, "chunk_keys": 5, "chunk_crc32c": 5}


def _checksums_not_integers(man):
    return {**man, "chunk_crc32c": ["x"] * len(man["chunk_crc32c"])}


@pytest.mark.parametrize("alter", [_drop_manifest, _keys_not_a_list, _checksums_not_integers])
def test_altered_manifest_reported_not_crashed(store, alter):
    # verify used to fail with KeyError (no manifest), TypeError (keys not a list: open_store
    # too) or ValueError (checksums not integers) instead of reporting the damage
    group = zarr.open_group(str(store), mode="r+")
    attrs = dict(group.attrs)
    man = alter(attrs.pop("manifest"))
    group.attrs.clear()
    group.attrs.update(attrs if man is None else {**attrs, "manifest": man})
    problems = verify_store(store)
    assert any("manifest" in p for p in problems), problems
    with pytest.raises(KernelInputError, match="manifest"):
        open_store(store)


# ------------------------------------------------------------------ format /1 stores
def _legacy_copy(src, dst):
    """The same kernels as a store of format /1: no checksum codec, no manifest."""
    old = zarr.open_group(str(src), mode="r")
    group = zarr.open_group(str(dst), mode="w")
    arr = group.create_array("kernels", shape=old["kernels"].shape, chunks=old["kernels"].chunks, dtype="f8",
                             compressors=None, fill_value=0.0)
    arr[...] = old["kernels"][...]
    attrs = {k: v for k, v in old.attrs.items() if k != "manifest"}
    group.attrs.update({**attrs, "format": OLD_FORMAT})


def test_legacy_store_refused_with_the_remedy(store, tmp_path):
    """Format /1 (no checksums, no manifest) is no longer read: open, fit, read and verify refuse it."""
    legacy = tmp_path / "legacy.zarr"
    _legacy_copy(store, legacy)
    expected = r"has format lswmkc-kernel-store/1.*no longer reads.*rerun `lswmkc prepare`"
    with pytest.raises(KernelInputError, match=expected):
        open_store(legacy)
    with pytest.raises(KernelInputError, match=expected):
        LSWMKC(15, alpha=8, random_state=0).fit(legacy)
    with pytest.raises(KernelInputError, match=expected):
        read_store_rows(legacy, 0, 165)
    problems = verify_store(legacy)
    assert len(problems) == 1 and "lswmkc-kernel-store/1" in problems[0] and "lswmkc prepare" in problems[0]
    proc = lswmkc_main("verify", legacy)
    assert proc.returncode == 2 and "DAMAGED" in proc.stdout and "lswmkc-kernel-store/1" in proc.stdout
    _assert_cli_error(lswmkc_main("fit", legacy, "--alpha", 8), "lswmkc-kernel-store/1", "lswmkc prepare")


def test_verify_cli_on_a_non_store(tmp_path):
    (tmp_path / "empty.zarr").mkdir()
    proc = lswmkc_main("verify", tmp_path / "empty.zarr")
    assert proc.returncode == 2 and "not a kernel store" in proc.stdout
    proc = lswmkc_main("verify", tmp_path / "absent.zarr")
    assert proc.returncode == 2 and "lswmkc: error: kernel store not found" in proc.stderr
