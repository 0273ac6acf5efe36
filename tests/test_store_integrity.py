"""Whatever `lswmkc verify` calls damaged, every fit refuses: in process, on Dask workers, in a sweep.

Stores are real zarr stores written by :func:`lswmkc_dask.prepare` in ``tmp_path`` and
damaged as a user or a faulty copy would damage them: a chunk from another store of the
same shape, all chunks swapped, a chunk replaced by a symbolic link, a chunk edited
with its crc32c trailer recomputed, edited or permuted labels, a format downgrade,
attributes that disagree with the array, NaN labels, a value of 1e300.
"""

from __future__ import annotations

import os
import re
import shutil

import google_crc32c
import numpy as np
import pytest
import zarr
from _helpers import lswmkc_main

from lswmkc_dask import LSWMKC, KernelInputError, prepare
from lswmkc_dask.io import integrity, verify_store

pytestmark = pytest.mark.timeout(300)

N, M, BLOCK = 48, 3, 12  # 4 chunks of 12 rows
CHUNK1 = "kernels/c/0/1/0"  # rows 12-23
ROWS1 = r"rows 12-23 of all kernels \(kernels/c/0/1/0\)"


def _kernels(seed):
    """M linear kernels of 3 well separated clusters, and their labels."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), N // 3)
    centres = rng.standard_normal((3, 6)) * 4
    views = [centres[y] + rng.standard_normal((N, 6)) for _ in range(M)]
    return np.stack([v @ v.T for v in views]), y


@pytest.fixture
def stores(tmp_path):
    """Two stores of the same shape and chunks, of different kernels: (store, other)."""
    paths = []
    for seed, name in ((0, "store.zarr"), (1, "other.zarr")):
        kernels, y = _kernels(seed)
        prepare(kernels, tmp_path / name, labels=y, block_rows=BLOCK)
        paths.append(tmp_path / name)
    assert verify_store(paths[0]) == [] and verify_store(paths[1]) == []
    return paths


def _fit(path, **kw):
    return LSWMKC(3, alpha=8, max_iter=3, min_iter=2, n_init=2, random_state=0, **kw).fit(str(path))


def _edit_attrs(path, **changes):
    zarr.open_group(str(path), mode="r+").attrs.update(changes)


def _attrs(path):
    return dict(zarr.open_group(str(path), mode="r").attrs)


# ------------------------------------------------------------------------ damage
def _chunk_from_other(store, other):
    shutil.copy(other / CHUNK1, store / CHUNK1)


def _all_chunks_swapped(store, other):
    for i in range(N // BLOCK):
        shutil.copy(other / f"kernels/c/0/{i}/0", store / f"kernels/c/0/{i}/0")


def _symlinked_chunk(store, other):
    """The same bytes, but through a link out of the store (crc32c and manifest agree)."""
    outside = store.parent / "elsewhere"
    outside.mkdir()
    os.replace(store / CHUNK1, outside / "chunk")
    os.symlink(outside / "chunk", store / CHUNK1)


def _edited_chunk_trailer_recomputed(store, other):
    """One off-diagonal value changed in the bytes, the crc32c trailer recomputed to match."""
    raw = bytearray((store / CHUNK1).read_bytes())
    data = np.frombuffer(bytes(raw[:-4]), dtype="<f8").reshape(M, BLOCK, N).copy()
    data[1, 3, 40] += 0.25
    body = data.tobytes()
    (store / CHUNK1).write_bytes(body + int(google_crc32c.value(body)).to_bytes(4, "little"))


def _labels_mod(store, other):
    _edit_attrs(store, labels=[v % 2 for v in _attrs(store)["labels"]])


def _labels_permuted(store, other):
    labels = _attrs(store)["labels"]
    _edit_attrs(store, labels=[labels[i] for i in np.random.default_rng(3).permutation(N)])


def _format_downgraded(store, other):
    _edit_attrs(store, format="lswmkc-kernel-store/1")


def _wrong_kernel_count(store, other):
    _edit_attrs(store, n_kernels=M - 1)


def _nan_label(store, other):
    labels = _attrs(store)["labels"]
    labels[5] = float("nan")
    _edit_attrs(store, labels=labels)


def _huge_value(store, other):
    """1e300 written through zarr, and the manifest's crc32c of the chunk updated to match:
    only the bound |K_ij| <= 1 of a preprocessed kernel is left to find it."""
    zarr.open_array(str(store), path="kernels", mode="r+")[2, 14, 30] = 1e300
    manifest = _attrs(store)["manifest"]
    i = manifest["chunk_keys"].index(CHUNK1)
    manifest["chunk_crc32c"][i] = int.from_bytes((store / CHUNK1).read_bytes()[-4:], "little")
    _edit_attrs(store, manifest=manifest)


def _manifest_not_an_object(store, other):
    _edit_attrs(store, manifest=[1])


DAMAGE = {
    "chunk-from-another-store": (_chunk_from_other, ROWS1 + r" is not the chunk `lswmkc prepare` wrote"),
    "all-chunks-swapped": (_all_chunks_swapped, r"rows 0-11 of all kernels .* is not the chunk `lswmkc prepare` wrote"),
    "symlinked-chunk": (_symlinked_chunk, ROWS1 + r" is a symbolic link"),
    "edited-chunk-trailer-recomputed": (_edited_chunk_trailer_recomputed,
                                        ROWS1 + r" is not the chunk `lswmkc prepare` wrote"),
    "labels-edited": (_labels_mod, r"its labels are not what `lswmkc prepare` wrote"),
    "labels-permuted": (_labels_permuted, r"its labels are not what `lswmkc prepare` wrote"),
    "format-downgraded": (_format_downgraded, r"lswmkc-kernel-store/1.*rerun `lswmkc prepare`"),
    "attributes-wrong-kernel-count": (_wrong_kernel_count,
                                      r"its attributes say 2 kernels x 48 samples but the array holds 3 x 48"),
    "manifest-not-an-object": (_manifest_not_an_object, r"the manifest of its chunks is missing from its attributes"),
    "nan-label": (_nan_label, r"1 of its labels is missing \(NaN.*sample 5"),
    "value-1e300": (_huge_value, (r"kernel 2 has 1 value larger than 1 in absolute value in row 14 "
                                  r"\(kernels/c/0/1/0\), the first 1e\+300 at row 14, column 30")),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_what_verify_calls_damaged_fit_refuses(stores, damage):
    store, other = stores
    corrupt, expected = DAMAGE[damage]
    corrupt(store, other)
    problems = verify_store(store)
    assert any(re.search(expected, p) for p in problems), problems
    with pytest.raises(KernelInputError, match=expected) as err:
        _fit(store)
    message = str(err.value)
    assert str(store) in message and "lswmkc prepare" in message, message


def test_intact_stores_fit_and_symlinked_store_directory_is_fine(stores, tmp_path):
    """No false alarm: an intact store fits; a link to the whole store (not to a chunk inside it) is accepted."""
    store, _ = stores
    link = tmp_path / "link.zarr"
    os.symlink(store, link)
    assert verify_store(link) == []
    np.testing.assert_array_equal(_fit(link).kernel_weights_, _fit(store).kernel_weights_)


def test_cli_fit_of_a_store_with_a_swapped_chunk_exits_2_with_one_error_line(stores, tmp_path):
    store, other = stores
    _chunk_from_other(store, other)
    proc = lswmkc_main("fit", store, "--alpha", "8", "--n-clusters", "3")  # in process: it starts no cluster
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("lswmkc: error:")]
    assert len(errors) == 1, proc.stderr
    assert re.search(ROWS1 + r" is not the chunk `lswmkc prepare` wrote", errors[0]), errors[0]
    assert str(store) in errors[0] and "rerun `lswmkc prepare`" in errors[0]


# ---------------------------------------------------------- on Dask workers, read once
@pytest.fixture
def counted_reads(monkeypatch):
    """(start, stop, worker address or None) of every read through checked_read (the real one runs;
    the workers are threads of this process here)."""
    reads = []
    real = integrity.checked_read

    def counting(location, start, stop):
        from distributed import get_worker

        try:
            where = get_worker().address
        except ValueError:  # not in a Dask task
            where = None
        reads.append((start, stop, where))
        return real(location, start, stop)

    monkeypatch.setattr(integrity, "checked_read", counting)
    return reads


@pytest.fixture
def threaded_client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.mark.parametrize("cache", [True, False], ids=["cached-blocks", "blocks-read-per-iteration"])
@pytest.mark.parametrize("damage", ["chunk-from-another-store", "flipped-byte"])
def test_damaged_chunk_refused_on_a_worker_after_one_read(stores, threaded_client, counted_reads, damage, cache):
    """The worker read path refuses the damage, and does not read the damaged chunk again (no retries)."""
    store, other = stores
    if damage == "flipped-byte":
        raw = bytearray((store / CHUNK1).read_bytes())
        raw[1000] ^= 0xFF
        (store / CHUNK1).write_bytes(bytes(raw))
        expected = ROWS1 + " fails its crc32c checksum"
    else:
        _chunk_from_other(store, other)
        expected = ROWS1 + " is not the chunk `lswmkc prepare` wrote"
    with pytest.raises(KernelInputError, match=expected):
        _fit(store, cache_kernels=cache)  # the active client runs it
    assert threaded_client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.workers)) == 1
    damaged_reads = [r for r in counted_reads if r[0] < 24 and r[1] > 12]
    assert len(damaged_reads) == 1, counted_reads
    assert damaged_reads[0][2] in threaded_client.scheduler_info()["workers"], counted_reads  # read by the worker


def test_sweep_refuses_a_swapped_chunk(stores, threaded_client, tmp_path):
    from lswmkc_dask.grid.sweep import sweep

    store, other = stores
    _all_chunks_swapped(store, other)
    with pytest.raises(KernelInputError, match=r"is not the chunk `lswmkc prepare` wrote"):
        sweep(str(store), tmp_path / "sweep", n_clusters=3, alphas=(8,), max_iter=3, min_iter=2, n_init=2,
              progress=False)


def test_sweep_in_task_mode_reads_a_damaged_store_once(stores, threaded_client, counted_reads, tmp_path):
    # task mode: one task reads the whole store for the workers; damage is not retried
    from lswmkc_dask.grid.sweep import sweep

    store, other = stores
    _chunk_from_other(store, other)
    with pytest.raises(KernelInputError, match=ROWS1 + " is not the chunk `lswmkc prepare` wrote"):
        sweep(str(store), tmp_path / "sweep", n_clusters=3, alphas=(8,), max_iter=3, min_iter=2, n_init=2,
              progress=False, mode="task")
    assert len([r for r in counted_reads if r[2] is not None]) == 1, counted_reads


def test_edited_training_statistics_are_refused(tmp_path):
    """The statistics prepare keeps for predict are covered by the manifest: values rewritten
    (with a valid chunk checksum) are refused naming them, and so is a store they were removed
    from; a store of an earlier version, prepared without them (none in its manifest), opens."""
    from lswmkc_dask import open_store

    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 30, 4))
    store = prepare(np.einsum("pik,pjk->pij", x, x) + 0.1 * np.eye(30), tmp_path / "k.zarr")
    stats = store.preprocessing_statistics()
    assert stats.col_means.shape == stats.diag.shape == (2, 30) and stats.kernel_index.tolist() == [0, 1]
    arr = zarr.open_group(tmp_path / "k.zarr", mode="r+")["statistics"]
    arr[1, 0, 0] = arr[1, 0, 0] * 2
    with pytest.raises(KernelInputError, match=r"is damaged: its training statistics \('statistics'\) are not what"):
        open_store(tmp_path / "k.zarr").preprocessing_statistics()
    shutil.rmtree(tmp_path / "k.zarr" / "statistics")  # removed: the manifest still holds their sha256
    with pytest.raises(KernelInputError, match=r"its training statistics \('statistics'\) are missing"):
        open_store(tmp_path / "k.zarr")
    manifest = _attrs(tmp_path / "k.zarr")["manifest"]
    del manifest["statistics_sha256"]  # as a store of an earlier version, prepared without them
    _edit_attrs(tmp_path / "k.zarr", manifest=manifest)
    assert open_store(tmp_path / "k.zarr").preprocessing_statistics() is None
    assert verify_store(tmp_path / "k.zarr") == []
