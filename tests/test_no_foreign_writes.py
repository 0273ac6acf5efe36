"""No command deletes or replaces anything it did not write (issue: `verify --overwrite`
deleted whole directories, `plot --overwrite` a user's directory named like a PNG).

Every command that takes ``--output`` runs with ``--overwrite`` against a foreign
directory, a foreign file, its own input, the working directory and the home directory;
every file and directory that existed before is unchanged afterwards. The commands run
in this process through ``cli.main`` (what the ``lswmkc`` script calls), with the working
and home directories of the test.
"""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

from lswmkc_dask import cli, prepare
from lswmkc_dask.io.ownership import json_is_ours, png_is_ours

from _helpers import tree_snapshot

QUICK = ["--max-iter", "2", "--n-init", "2", "--quiet"]
COMMANDS = ("prepare", "fit", "sweep", "compare", "plot", "verify")
TARGETS = ("foreign_dir", "foreign_file", "input", "cwd", "home")


@pytest.fixture(autouse=True)
def _keep_sigterm():
    """cli.main installs its SIGTERM handler; give the test process its own back."""
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)



@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A kernel file, its store and a finished sweep directory (the commands' inputs)."""
    root = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.normal(0, 1, (20, 4)), rng.normal(4, 1, (20, 4))])
    kernels = np.stack([x @ x.T, np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 8.0), (x @ x.T + 1) ** 2])
    labels = np.repeat([0, 1], 20)
    np.savez(root / "kernels.npz", kernels=kernels, labels=labels)
    prepare(str(root / "kernels.npz"), root / "kernels.zarr", block_rows=16)
    saved = signal.getsignal(signal.SIGTERM)
    try:
        assert cli.main(["sweep", str(root / "kernels.zarr"), "--alphas", "1", "8", *QUICK,
                         "--output", str(root / "sw")]) == 0
    finally:
        signal.signal(signal.SIGTERM, saved)
    return root


def _argv(command, inputs, output):
    store, sw = str(inputs / "kernels.zarr"), str(inputs / "sw")
    return {
        "prepare": ["prepare", str(inputs / "kernels.npz"), "--output", output],
        "fit": ["fit", store, "--alpha", "8", *QUICK, "--output", output],
        "sweep": ["sweep", store, "--alphas", "8", *QUICK, "--output", output],
        "compare": ["compare", store, *QUICK, "--output", output],
        "plot": ["plot", sw, "--alpha", "8", "--output", output],
        "verify": ["verify", store, "--output", output],
    }[command] + ["--overwrite"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("command", COMMANDS)
def test_overwrite_never_touches_what_lswmkc_did_not_write(command, target, inputs, tmp_path, monkeypatch, capsys):
    home, work = tmp_path / "home", tmp_path / "work"
    for d in (home, work):
        d.mkdir()
        (d / "notes.txt").write_text(f"the user's notes in {d.name}")
        (d / "data").mkdir()
        (d / "data" / "thesis.tex").write_text("three years of work")
    foreign = work / "results"
    foreign.mkdir()
    (foreign / "table.csv").write_text("a,b\n1,2\n")
    # what `lswmkc plot` would write there: a user's PNG, a directory named like a PNG
    (foreign / "convergence.png").write_bytes(b"\x89PNG\r\n\x1a\nthe user's own figure")
    (foreign / "affinity_heatmap.png").mkdir()
    (foreign / "affinity_heatmap.png" / "inside.txt").write_text("kept")
    (work / "results.json").write_text(json.dumps({"store": "mine", "ok": True}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MPLCONFIGDIR", str(inputs.parent / "mplconfig"))  # not matplotlib's cache in HOME
    monkeypatch.chdir(work)
    input_of = {"prepare": inputs / "kernels.npz", "plot": inputs / "sw"}.get(command, inputs / "kernels.zarr")
    output = {"foreign_dir": str(foreign), "foreign_file": str(work / "results.json"), "input": str(input_of),
              "cwd": ".", "home": str(home)}[target]

    before = {"inputs": tree_snapshot(inputs), "tmp": tree_snapshot(tmp_path)}
    saved = signal.getsignal(signal.SIGTERM)
    try:
        status = cli.main(_argv(command, inputs, output))
    finally:
        signal.signal(signal.SIGTERM, saved)
    err = capsys.readouterr().err
    after = {"inputs": tree_snapshot(inputs), "tmp": tree_snapshot(tmp_path)}

    assert "Traceback" not in err
    assert after["inputs"] == before["inputs"], "an input was changed"
    for rel, content in before["tmp"].items():
        assert after["tmp"].get(rel) == content, f"{rel} was changed or removed by {command} --output {target}"
    if command == "plot" and target in ("cwd", "home"):
        # PNGs written beside the user's files (none of the same name): allowed, and signed
        assert status == 0, err
        new = set(after["tmp"]) - set(before["tmp"])
        assert new and all(png_is_ours(tmp_path / rel) for rel in new if rel.endswith(".png")), new
    else:
        assert status == 2, err
        assert err.strip().splitlines()[-1].startswith("lswmkc: error: "), err
        assert "pass --overwrite" not in err, "the refusal must not suggest --overwrite"
        assert after["tmp"] == before["tmp"], "nothing may be written on a refusal"


def test_verify_output_replaces_only_its_own_json(inputs, tmp_path, capsys):
    # verify --output writes a signed JSON; --overwrite replaces that one, nothing else
    out = tmp_path / "verify.json"
    assert cli.main(["verify", str(inputs / "kernels.zarr"), "--output", str(out)]) == 0
    assert json_is_ours(out) and json.loads(out.read_text())["ok"] is True
    first = out.stat().st_ino
    assert cli.main(["verify", str(inputs / "kernels.zarr"), "--output", str(out)]) == 2
    assert "already exists (pass --overwrite to replace it)" in capsys.readouterr().err
    assert cli.main(["verify", str(inputs / "kernels.zarr"), "--output", str(out), "--overwrite"]) == 0
    assert out.stat().st_ino != first and json_is_ours(out)
    # a JSON file of the same shape that lswmkc did not write (no written_by): kept
    data = json.loads(out.read_text())
    del data["written_by"]
    out.write_text(json.dumps(data))
    assert cli.main(["verify", str(inputs / "kernels.zarr"), "--output", str(out), "--overwrite"]) == 2
    assert "was not written by lswmkc" in capsys.readouterr().err
    assert "written_by" not in json.loads(out.read_text())
    # a symbolic link to our own JSON: neither the link nor its target is replaced
    ours = tmp_path / "ours.json"
    assert cli.main(["verify", str(inputs / "kernels.zarr"), "--output", str(ours)]) == 0
    link = tmp_path / "link.json"
    link.symlink_to(ours)
    text = ours.read_text()
    assert cli.main(["verify", str(inputs / "kernels.zarr"), "--output", str(link), "--overwrite"]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert link.is_symlink() and ours.read_text() == text


def test_signatures_are_read_from_the_files(tmp_path):
    # png_is_ours reads the PNG's Software text chunk; json_is_ours the written_by key
    from lswmkc_dask.plots._base import new_figure, save_figure

    fig = new_figure((2, 2))
    fig.subplots().plot([0, 1], [0, 1])
    png = save_figure(fig, tmp_path / "f.png")
    assert png_is_ours(png)
    fig.savefig(tmp_path / "plain.png", format="png")  # matplotlib's own Software chunk
    assert not png_is_ours(tmp_path / "plain.png")
    (tmp_path / "short.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    assert not png_is_ours(tmp_path / "short.png") and not png_is_ours(tmp_path / "absent.png")
    (tmp_path / "a.json").write_text('{"written_by": "lswmkc-dask 0.1.0"}')
    (tmp_path / "b.json").write_text('["written_by"]')
    (tmp_path / "c.json").write_text("not json")
    assert json_is_ours(tmp_path / "a.json")
    assert not json_is_ours(tmp_path / "b.json") and not json_is_ours(tmp_path / "c.json")


@pytest.mark.parametrize("chunk", ["tEXt", "zTXt", "iTXt", "iTXt compressed"])
def test_png_signature_in_any_text_chunk(tmp_path, chunk):
    """A figure of lswmkc's whose text chunks an optimiser rewrote (compressed: zTXt, or
    iTXt) is still recognised as lswmkc's, and the same chunks naming another program are not."""
    from PIL import Image, PngImagePlugin

    for software, ours in (("lswmkc-dask 0.1.0", True), ("matplotlib version3.9", False)):
        info = PngImagePlugin.PngInfo()
        if chunk.startswith("iTXt"):
            info.add_itxt("Software", software, lang="en", tkey="Software", zip=chunk.endswith("compressed"))
        else:
            info.add_text("Software", software, zip=chunk == "zTXt")
        path = tmp_path / f"{ours}.png"
        Image.new("RGB", (3, 2)).save(path, pnginfo=info)
        assert png_is_ours(path) is ours, (chunk, software)
    (tmp_path / "dir.png").mkdir()
    (tmp_path / "jpeg.png").write_bytes(b"\xff\xd8\xff\xe0 not a PNG")
    assert not png_is_ours(tmp_path / "dir.png") and not png_is_ours(tmp_path / "jpeg.png")


def test_fit_and_prepare_through_a_symbolic_link_replace_the_target(inputs, tmp_path, capsys):
    # the rule of sweep directories: a link to an lswmkc output stays a link; its target is replaced
    for argv in (["fit", str(inputs / "kernels.zarr"), "--alpha", "8", *QUICK],
                 ["prepare", str(inputs / "kernels.npz")]):
        target, link = tmp_path / f"{argv[0]}-target", tmp_path / f"{argv[0]}-link"
        assert cli.main([*argv, "--output", str(target)]) == 0
        link.symlink_to(target)
        stamp = (target / ".lswmkc-output").stat().st_ino
        assert cli.main([*argv, "--output", str(link), "--overwrite"]) == 0, capsys.readouterr().err
        assert link.is_symlink() and os.readlink(link) == str(target)
        assert (target / ".lswmkc-output").stat().st_ino != stamp  # a new output in the target
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert cli.main(["fit", str(inputs / "kernels.zarr"), "--alpha", "8", *QUICK, "--output", str(dangling),
                     "--overwrite"]) == 2
    assert dangling.is_symlink() and not (tmp_path / "nowhere").exists()
