"""No binary artefact is tracked by git: the repository holds source, documents and the
small data sets the package ships (listed below with what uses them).

A tracked file is an artefact when its name says so (wheels, archives, arrays, stores,
compiled code, images), when its first bytes hold a NUL (git's own test of a binary
file), or when it is over :data:`MAX_BYTES`. Build outputs, runs and figures belong in
``.gitignore``; benchmark figures in the benchmark's output directory.

Links between the documents resolve: to a file that exists and, with an anchor, to a
heading it has; benchmarks/README.md is a reference of at most
:data:`BENCH_README_MAX_LINES` lines with a section and an index row per benchmark script,
each section linking its figures in docs/performance.md.

No document or message installs the package by name from the package index, where it is
not published: an install is from the checkout (``pip install '.[gpu]'``).
"""

from __future__ import annotations

import re
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
    **{f"tests/data/competitors/{name}_yale_init.npz": f"the starts of {name}'s reference run by its authors' code "
                                                        "(eigenvector signs and a random k-means of theirs)"
       for name in ("lfmvc", "oplfmvc")},
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
    assert artefact_reason("lswmkc_dask/engine/fit.py", text, len(text)) is None
    assert artefact_reason("py_spy-0.4.0-py2.py3-none-manylinux_2_5_x86_64.whl", b"PK\3\4", 2_900_000)
    assert artefact_reason("results/yale.zarr/kernels/c/0/0/0", b"\1\2", 10)
    assert artefact_reason("yale.zarr", b"", 0)
    assert artefact_reason("out/K.npy", b"\x93NUMPY", 128)
    assert artefact_reason("data/blob", b"abc\0def", 7) == "binary content (a NUL byte)"
    assert (artefact_reason("notes.txt", b"a" * 10, MAX_BYTES + 1) or "").startswith(f"{MAX_BYTES + 1} bytes")
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


#: A Markdown link's target: ``[text](target)``.
MD_LINK = re.compile(r"\]\(([^()\s]+)\)")
#: A link with a heading's anchor into the benchmarks' reference, from any file.
BENCH_LINK = re.compile(r"benchmarks/README\.md#([\w-]+)")
#: A link with a heading's anchor into the page of the benchmarks' figures, from any file.
PERF_LINK = re.compile(r"docs/performance\.md#([\w-]+)")
#: benchmarks/README.md is a reference (what each script measures, how to run it); the
#: figures live in docs/performance.md.
BENCH_README_MAX_LINES = 500


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, every character other
    than a letter, digit, ``_``, ``-`` or space dropped, each space a ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def heading_anchors(text: str) -> set[str]:
    """The anchors of the ATX headings of a Markdown text (outside fenced code); a
    repeated heading gets ``-1``, ``-2`` ... as on GitHub."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"#{1,6}\s+(.+?)\s*$", line)
        if m and not fenced:
            anchor = github_anchor(m.group(1))
            anchors.add(f"{anchor}-{seen[anchor]}" if anchor in seen else anchor)
            seen[anchor] = seen.get(anchor, 0) + 1
    return anchors


def test_heading_anchors():
    """The test's anchors are GitHub's (checked by hand against the rendered page)."""
    text = ("# Benchmarks\n\n## A complete n = 12000 fit on 2 cores (`bench_scale.py --sizes 12000`)\n"
            "```bash\n# a comment, not a heading\n```\n### Which eigensolver for K\\*\n### Benchmarks\n")
    assert heading_anchors(text) == {"benchmarks", "a-complete-n--12000-fit-on-2-cores-bench_scalepy---sizes-12000",
                                     "which-eigensolver-for-k", "benchmarks-1"}


#: A MyST include directive: ````{include} path```` (its headings become the page's).
MYST_INCLUDE = re.compile(r"^```\{include\}\s+(\S+)", re.M)


def document_anchors(path: Path) -> set[str]:
    """The heading anchors of a Markdown document, with those of the documents it
    includes (a page of the documentation site that shows a README of the repository)."""
    text = path.read_text(encoding="utf-8")
    anchors = heading_anchors(text)
    for included in MYST_INCLUDE.findall(text):
        anchors |= document_anchors((path.parent / included).resolve())
    return anchors


def _text(path: str) -> str | None:
    """The text of a tracked file, or None for one that is not UTF-8 text."""
    try:
        return (ROOT / path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def test_links_into_documents_resolve():
    """Every link into benchmarks/README.md or docs/performance.md with a heading's
    anchor, anywhere in the repository (a comment or docstring of the code included), and
    every relative link of a tracked Markdown file (``[..](file)``, ``[..](file#anchor)``,
    ``[..](#anchor)``), points to a file that exists and a heading it has."""
    broken = []
    bench_anchors = heading_anchors((ROOT / "benchmarks" / "README.md").read_text())
    perf_anchors = document_anchors(ROOT / "docs" / "performance.md")
    for path in _tracked_files():
        text = _text(path) if (ROOT / path).is_file() else None
        if text is None:
            continue
        broken += [f"{path}: benchmarks/README.md#{a}" for a in BENCH_LINK.findall(text) if a not in bench_anchors]
        broken += [f"{path}: docs/performance.md#{a}" for a in PERF_LINK.findall(text) if a not in perf_anchors]
        if not path.endswith(".md"):
            continue
        for target in MD_LINK.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            file, _, anchor = target.partition("#")
            dest = (ROOT / path).parent / file if file else ROOT / path
            if not dest.exists():
                broken.append(f"{path}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in document_anchors(dest):
                broken.append(f"{path}: {target} (no such heading)")
    assert not broken, "links to a missing file or heading: " + "; ".join(broken)


def test_every_benchmark_has_a_section_and_an_index_row():
    """benchmarks/README.md has, for every ``benchmarks/bench_*.py``, a heading that
    names it and a row of its index that links to that heading."""
    text = (ROOT / "benchmarks" / "README.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    linked = set(re.findall(r"\]\(#([\w-]+)\)", text))
    missing = []
    for script in sorted(p.name for p in (ROOT / "benchmarks").glob("bench_*.py")):
        own = [h for h in headings if f"`{script}" in h]
        if not own:
            missing.append(f"{script}: no section")
        elif not any(github_anchor(h.lstrip("# ")) in linked for h in own):
            missing.append(f"{script}: no index row")
    assert not missing, "benchmarks/README.md: " + "; ".join(missing)


def test_benchmarks_readme_is_a_reference():
    """benchmarks/README.md stays a reference of at most :data:`BENCH_README_MAX_LINES`
    lines, and each script's section links its figures in docs/performance.md (to a
    heading there: :func:`test_links_into_documents_resolve`)."""
    text = (ROOT / "benchmarks" / "README.md").read_text()
    lines = text.count("\n") + (not text.endswith("\n"))
    assert lines <= BENCH_README_MAX_LINES, (
        f"benchmarks/README.md: {lines} lines, over {BENCH_README_MAX_LINES}: figures belong in docs/performance.md")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    unlinked = [s.splitlines()[0] for s in sections if "../docs/performance.md#" not in s]
    assert not unlinked, "benchmarks/README.md: sections without a link to their figures: " + "; ".join(unlinked)


#: An install of the package by its name (from the package index, where it is not
#: published): ``pip install lswmkc-dask``, or the name with extras anywhere
#: (``'lswmkc-dask[gpu]'``, a message split over two string literals included). A path
#: or URL that ends in the name (``pip install /src/lswmkc-dask``) is a checkout.
INDEX_INSTALL = re.compile(r"pip3? install(?:\s+-\S+)*\s+['\"`]?lswmkc-dask(?![\w/.-])|(?<![\w/.-])lswmkc-dask\[")
#: Files that may name the extras by the package's name: pyproject.toml (an extra that
#: includes another), the changelog (what earlier releases said) and the tests.
INDEX_INSTALL_EXEMPT = ("pyproject.toml", "CHANGELOG.md", "tests/")


def test_index_install_pattern():
    """The pattern finds the installs by name and leaves the checkout's installs alone."""
    for line in ("pip install 'lswmkc-dask[gpu-cuda13]'", "pip install lswmkc-dask", "pip install -U lswmkc-dask",
                 '"CuPy is not installed (pip install "\n "\'lswmkc-dask[gpu]\')"', "``lswmkc-dask[plot]``"):
        assert INDEX_INSTALL.search(line), line
    for line in ("pip install '.[gpu]'", "pip install /path/to/lswmkc-dask", "pip install /shared/src/lswmkc-dask x",
                 'pip install "git+https://host/lswmkc-dask.git@abc"', "docker build -t lswmkc-dask:0.1.0 .",
                 "install lswmkc-dask into the same environment"):
        assert not INDEX_INSTALL.search(line), line


def test_no_install_from_the_package_index():
    """No tracked document, script or message of the package tells the user to install
    lswmkc-dask by name: it is not on the package index, only the checkout installs."""
    found = []
    for path in _tracked_files():
        text = None if path.startswith(INDEX_INSTALL_EXEMPT) or not (ROOT / path).is_file() else _text(path)
        for number, line in enumerate((text or "").splitlines(), 1):
            if INDEX_INSTALL.search(line):
                found.append(f"{path}:{number}: {line.strip()}")
    assert not found, "installs from the package index (use pip install '.[extra]' in the checkout): " + "; ".join(found)


#: The documentation site's source, and where its examples gallery comes from.
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"
#: A reference to a page of the site: ``{doc}`target``` or ``{doc}`text <target>``` (MyST),
#: ``:doc:`...``` (reStructuredText).
DOC_ROLE = re.compile(r"[{:]doc[}:]`(?:[^`<]*<)?([^`>]+)>?`")


def site_page(source: Path, target: str) -> Path | None:
    """The source of the site's page ``target`` named in ``source`` (a path without its
    suffix, relative to ``source`` or, with a leading ``/``, to ``docs/``): a Markdown or
    reStructuredText page, or a gallery script of ``examples/`` for ``auto_examples/NAME``
    (``auto_examples/index`` is the gallery's ``README.rst``); None if there is none."""
    base = DOCS / target.lstrip("/") if target.startswith("/") else source.parent / target
    base = base.resolve()
    if base.parent == (DOCS / "auto_examples").resolve():  # generated by the build: from its script
        script = EXAMPLES / ("README.rst" if base.name == "index" else base.name + ".py")
        return script if script.is_file() else None
    for suffix in (".md", ".rst"):
        if base.with_name(base.name + suffix).is_file():
            return base.with_name(base.name + suffix)
    return None


def _toctree_entries(text: str) -> list[str]:
    """The pages of the toctrees of a page (MyST ```` ```{toctree} ```` or rST ``.. toctree::``;
    an entry ``Title <page>`` names ``page``)."""
    entries = []
    for block in re.findall(r"```\{toctree\}\n(.*?)```", text, re.S):
        entries += [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.startswith(":")]
    for block in re.findall(r"\.\. toctree::\n((?:[ \t]+.*\n|\n)+)", text):
        entries += [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith(":")]
    return [re.sub(r"^.*<(.+)>$", r"\1", entry) for entry in entries]


def test_site_pages_resolve():
    """Every page of the documentation site named in a toctree or a ``doc`` role exists
    (its source, or the gallery script that makes it), and every page of ``docs/`` is in
    a toctree (Sphinx builds the rest too, but no reader finds them)."""
    broken, in_toctree = [], {(DOCS / "index.md").resolve()}
    for source in sorted([*DOCS.rglob("*.md"), *DOCS.rglob("*.rst")]):
        if {"auto_examples", "generated", "_build", "_templates"} & set(source.relative_to(DOCS).parts):
            continue
        text = source.read_text(encoding="utf-8")
        for target in _toctree_entries(text):
            page = site_page(source, target)
            broken += [] if page else [f"{source.relative_to(ROOT)}: toctree entry {target}"]
            in_toctree |= {page.resolve()} if page else set()
        for target in DOC_ROLE.findall(text):
            if not site_page(source, target):
                broken.append(f"{source.relative_to(ROOT)}: doc {target}")
    assert not broken, "links to pages the site does not have: " + "; ".join(broken)
    orphans = [p.relative_to(ROOT).as_posix() for p in sorted([*DOCS.glob("*.md"), *DOCS.glob("*/*.md"),
                                                               *DOCS.glob("*/*.rst")])
               if "generated" not in p.parts and "auto_examples" not in p.parts and "_templates" not in p.parts
               and p.resolve() not in in_toctree]
    assert not orphans, "pages in no toctree: " + ", ".join(orphans)


def test_site_page_resolution():
    """The test's resolution itself: a page, a gallery script, an absolute path, a miss."""
    guide = DOCS / "user-guide" / "fit.md"
    assert site_page(guide, "../algorithm") == (DOCS / "algorithm.md").resolve()
    assert site_page(guide, "/api/cli") == (DOCS / "api" / "cli.rst").resolve()
    assert site_page(guide, "../auto_examples/plot_01_fit_and_figures") == EXAMPLES / "plot_01_fit_and_figures.py"
    assert site_page(DOCS / "index.md", "auto_examples/index") == EXAMPLES / "README.rst"
    assert site_page(guide, "../no-such-page") is None
    assert _toctree_entries("```{toctree}\n:hidden:\n\nfit\nAlgorithm <../algorithm>\n```\n") == ["fit", "../algorithm"]
    assert DOC_ROLE.findall("see {doc}`the fit <../auto_examples/plot_x>` and :doc:`/parameters`") == [
        "../auto_examples/plot_x", "/parameters"]
