"""The documentation: the Examples sections of the functions and classes users call
first run as written (doctest), every public name has an entry in the API reference,
and the examples gallery has its scripts. The site itself is built, with every warning
an error, by ``tests/run-all.sh``; its links are checked in ``test_repository.py``."""

from __future__ import annotations

import doctest
import re

import pytest
from _helpers import ROOT

import lswmkc_dask
from lswmkc_dask import LSWMKC, evaluate, open_store, prepare, selected_model, sweep
from lswmkc_dask.datasets import load_dataset
from lswmkc_dask.grid.compare import compare

#: What a new user calls first: each has an Examples section, run here.
FIRST_CALLED = [LSWMKC, sweep, compare, prepare, open_store, selected_model, evaluate, load_dataset]


@pytest.mark.parametrize("obj", FIRST_CALLED, ids=lambda o: o.__name__)
def test_examples_in_docstrings_run(obj):
    """The docstring has an Examples section, and its examples print what they say."""
    assert "\n    Examples\n    --------\n" in obj.__doc__, f"{obj.__name__}: no Examples section"
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(obj, obj.__name__) if t.examples]
    assert tests, f"{obj.__name__}: no doctest examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{obj.__name__}: {result.failed} of {result.attempted} examples failed (see above)"


def _reference_entries():
    """The names the API reference's autosummary tables list, with their module."""
    text = (ROOT / "docs" / "api" / "index.rst").read_text()
    names, module = set(), None
    for line in text.splitlines():
        m = re.match(r"\.\. currentmodule:: (\S+)", line)
        if m:
            module = m.group(1)
        elif re.match(r"   [A-Za-z_][\w.]*$", line) and module:
            names.add(f"{module}.{line.strip()}")
    return names, text


def test_every_public_name_has_a_reference_entry():
    names, text = _reference_entries()
    missing = [n for n in lswmkc_dask.__all__ if n != "__version__" and f"lswmkc_dask.{n}" not in names]
    assert not missing, f"docs/api/index.rst lists no entry for {missing}"
    assert "``__version__``" in text
    for entry in names:  # each entry is importable (a typo would only show at the docs build)
        module, _, name = entry.rpartition(".")
        assert hasattr(__import__(module, fromlist=[name]), name), entry


def test_gallery_has_its_examples():
    """At least 6 scripts, each with a title and a description (sphinx-gallery's form)."""
    scripts = sorted((ROOT / "examples").glob("plot_*.py"))
    assert len(scripts) >= 6, scripts
    for script in scripts:
        m = re.match(r'"""\n(.+)\n(=+)\n\n\S', script.read_text())
        assert m and len(m.group(2)) >= len(m.group(1)), f"{script.name}: no title in its docstring"
