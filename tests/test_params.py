"""The parameter table (lswmkc_dask/_params.py) reaches every entry point with one default.

For every row: the estimator's signature, ``get_params`` and constraints; ``FitOptions``;
``sweep``/``compare`` signatures; each command's option (flag, its default, the default
named in its help); ``report.json``'s params; and the generated docs table.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import numpy as np
import pytest

from lswmkc_dask import LSWMKC, FitOptions, sweep
from lswmkc_dask._params import (
    COMMANDS,
    DEFAULTS,
    ENTRY_POINTS,
    ROWS,
    _shown,
    markdown_table,
    parameter_constraints,
    row,
)
from lswmkc_dask.cli import build_parser
from lswmkc_dask.grid.compare import compare
from lswmkc_dask.report.record import fit_report

DOCS = Path(__file__).resolve().parents[1] / "docs" / "parameters.md"
FUNCTIONS = {"sweep": sweep, "compare": compare}


def _same(a, b):
    """Defaults equal, None and () being the same "none given"."""
    return (a in (None, ()) and b in (None, ())) or a == b


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


def test_every_row_is_well_formed():
    names = [r.name for r in ROWS]
    assert len(names) == len(set(names))
    for r in ROWS:
        assert r.doc and set(r.python) <= set(ENTRY_POINTS) and set(r.commands) <= set(COMMANDS), r.name
        assert (r.flag is None) == (not r.commands), r.name
        assert r.flag or r.cli_note, f"{r.name}: no flag and no word on the command line's mapping"


def test_rows_reach_the_estimator():
    signature = inspect.signature(LSWMKC).parameters
    params = LSWMKC().get_params()
    constraints = LSWMKC._parameter_constraints
    rows = [r for r in ROWS if "LSWMKC" in r.python]
    assert set(params) == {r.name for r in rows}  # no parameter outside the table
    assert list(constraints) == [r.name for r in rows if r.constraint]
    assert constraints.keys() == parameter_constraints().keys()
    for r in rows:
        assert _same(signature[r.name].default, r.default) and _same(params[r.name], r.default), r.name


def test_rows_reach_fit_options():
    fields = {f.name: f for f in dataclasses.fields(FitOptions)}
    for r in ROWS:
        if "FitOptions" not in r.python:
            assert r.name not in fields, r.name
            continue
        field = fields[r.name]
        if field.default is not dataclasses.MISSING:  # n_clusters is required
            assert _same(field.default, r.default), r.name
    options = FitOptions(n_clusters=3)
    assert options.alpha == DEFAULTS["alpha"] and options.n_init == DEFAULTS["n_init"]


@pytest.mark.parametrize("entry", ["sweep", "compare"])
def test_rows_reach_sweep_and_compare(entry):
    signature = inspect.signature(FUNCTIONS[entry]).parameters
    for r in ROWS:
        grid = r.grid if r.grid is not None and entry in r.grid.commands else None
        if grid is not None and grid.python != r.name:  # alphas, gammas
            assert grid.python in signature, (entry, grid.python)
            if grid.default is not None:
                assert tuple(signature[grid.python].default) == grid.default, (entry, r.name)
            continue
        if entry not in r.python and grid is None:
            continue
        assert r.name in signature, (entry, r.name)
        default = signature[r.name].default
        if grid is not None and grid.default is not None:
            assert tuple(default) == grid.default, (entry, r.name)
        else:
            assert _same(default, r.default), (entry, r.name)


def test_rows_reach_the_command_line():
    subs = _subparsers()
    for r in ROWS:
        for command in COMMANDS:
            grid = r.grid if r.grid is not None and command in r.grid.commands else None
            if command not in r.commands and grid is None:
                continue
            flag = grid.flag if grid else r.flag
            action = next((a for a in subs[command]._actions if flag in a.option_strings), None)
            assert action is not None, f"lswmkc {command}: no {flag}"
            assert all(o in action.option_strings for o in (() if grid else r.aliases)), (command, r.name)
            screen = subs[command].format_help()
            assert flag in screen and action.help, (command, flag)
            if grid is None:
                assert _same(action.default, r.command_default), (command, r.name)
                if r.command_default is not None and r.action is None:  # a switch's default: without the flag
                    assert _shown(r.command_default) in action.help, (command, r.name, action.help)
            elif grid.default is not None:
                assert tuple(action.default) == grid.default, (command, r.name)


def test_switch_rows_set_their_parameter():
    """--quiet is the verbose row: without it verbose=1 (a line per iteration), with it verbose=0;
    messages naming verbose=0 name --quiet, and verbose alone stays Python (no flag of its own)."""
    from lswmkc_dask.cli import flag_table

    switches = [r for r in ROWS if r.action == "store_const"]
    assert [r.name for r in switches] == ["verbose"]
    parser = build_parser()
    for command in ("fit", "sweep", "compare"):
        quiet = parser.parse_args([command, "--quiet", "--output", "o"])
        loud = parser.parse_args([command, "--output", "o"])
        assert (quiet.verbose, loud.verbose) == (0, 1) and not hasattr(loud, "quiet"), command
    assert LSWMKC(verbose=row("verbose").const).get_params()["verbose"] == 0  # a value the estimator takes
    assert flag_table()["verbose=0"] == "--quiet" and "verbose" not in flag_table()


def _python_default(target):
    """The default of ``keyword`` in the signature of the callable ``module:name``."""
    import importlib

    (where, keyword) = target
    module, name = where.split(":")
    function = getattr(importlib.import_module(module), name)
    if dataclasses.is_dataclass(function):
        return {f.name: f.default for f in dataclasses.fields(function)}[keyword]
    return inspect.signature(function).parameters[keyword].default


def test_command_line_rows_name_their_python_keyword():
    """A flag no entry point takes (--degree, --dtype, --scheduler, TLS) names the Python
    keyword it sets, and the row's default is that keyword's default."""
    rows = [r for r in ROWS if r.flag and not r.python]
    assert {r.name for r in rows} >= {"degree", "dtype", "scheduler", "scheduler_file", "tls_ca_file", "tls_cert",
                                      "tls_key"}
    for r in rows:
        assert len(r.target) == 2, f"{r.name}: a flag of the command line alone names its Python keyword"
        assert _same(_python_default(r.target), r.default), r.name


def test_methods_and_taus_are_compares():
    """--methods and --taus (compare's grids of the baselines) carry compare()'s defaults."""
    from lswmkc_dask.grid.baselines import DEFAULT_TAUS
    from lswmkc_dask._params import DEFAULT_METHODS
    from lswmkc_dask.grid.compare import METHODS, compare

    assert row("methods").default == DEFAULT_METHODS == inspect.signature(compare).parameters["methods"].default
    assert row("taus").default == DEFAULT_TAUS
    compare_parser = _subparsers()["compare"]
    methods = next(a for a in compare_parser._actions if a.dest == "methods")
    assert tuple(methods.choices) == (*METHODS, "all")


@pytest.mark.parametrize("command", COMMANDS)
def test_flags_check_what_the_table_declares(command):
    """A flag's argparse type and choices are its row's constraint (one declaration): a
    value the flag takes is one the Python entry point takes, and one it refuses is refused
    there too, the message naming the bound."""
    import argparse

    from lswmkc_dask._constraints import Interval, Options, check

    texts = ["-1", "0", "1", "2", "5", "10000", "10001", str(2**32 - 1), str(2**32), "1.5", "1e300", "nan", "inf", "x"]
    checked = 0
    for action in _subparsers()[command]._actions:
        r = next((r for r in ROWS if r.name == action.dest), None)
        if r is None or not r.constraint or action.const is not None:
            continue
        for c in r.constraint:
            if isinstance(c, Interval) and r.type is None:
                convert = int if c.kind.__name__ == "Integral" else float
                for text in texts:
                    try:
                        wanted = check(r.constraint, convert(text))
                    except ValueError:
                        wanted = False
                    try:
                        action.type(text)
                    except argparse.ArgumentTypeError as exc:
                        assert not wanted and str(exc).startswith(("must be", "expected")), (r.name, text, exc)
                    else:
                        assert wanted, (r.name, text)
                checked += 1
            if isinstance(c, Options) and r.choices is None:
                assert tuple(action.choices) == c.values, r.name
                checked += 1
            if isinstance(c, Options) and r.choices is not None:  # --kernel: the names but 'precomputed'
                assert set(action.choices) < set(c.values), r.name
    assert checked >= {"prepare": 3, "predict": 0}.get(command, 8), command  # predict: how files are read


def test_rows_reach_report_json(yale_store):
    model = LSWMKC(15, alpha=8.0, max_iter=2, n_init=2).fit(yale_store)
    params = fit_report(model.result_, model.get_params())["params"]
    given = {"n_clusters": 15, "alpha": 8.0, "max_iter": 2, "n_init": 2}
    for r in ROWS:
        if "LSWMKC" not in r.python or r.name in ("client", "verbose"):  # not recorded: not portable, no effect
            assert r.name not in params, r.name
            continue
        assert _same(params[r.name], given.get(r.name, r.default)), r.name
    assert np.isfinite(model.objective_).all()


def test_docs_table_is_the_generated_one():
    assert DOCS.read_text() == markdown_table(), "regenerate: python -m lswmkc_dask._params > docs/parameters.md"
    for r in ROWS:
        assert f"| `{r.name}` |" in DOCS.read_text()


@pytest.mark.parametrize("entry", ["sweep", "compare"])
@pytest.mark.parametrize("bad", [{"n_init": 0}, {"max_iter": 1.5}, {"eig_threads": 0}, {"kernel": "sigmoid"}])
def test_grids_check_the_table_before_any_io(entry, bad, yale_store, tmp_path):
    """sweep() and compare() refuse a value out of the table's constraint by its name,
    before the output directory is made (as LSWMKC does before any data is read)."""
    from lswmkc_dask._validate import InvalidParameter

    (name,) = bad
    with pytest.raises(InvalidParameter, match=f"'{name}' parameter of {entry}") as info:
        FUNCTIONS[entry](yale_store, tmp_path / "out", alphas=[8.0], **{"n_init": 2, "max_iter": 2, **bad})
    assert info.value.parameter == name
    assert not (tmp_path / "out").exists()


def test_hyperparameters_of_a_grid_checked_in_one_call():
    from lswmkc_dask._validate import check_hyperparameters

    check_hyperparameters(10, [2, 3, 9], [0.0, 8.0], [1, 8])
    with pytest.raises(ValueError, match=r"n_clusters must be an integer in \[2, n_samples - 1 = 9\], got 10"):
        check_hyperparameters(10, [2, 10])
    with pytest.raises(ValueError, match=r"n_neighbors must be an integer in \[1, n_samples - 2 = 8\], got 9"):
        check_hyperparameters(10, 3, (1.0,), (5, 9))


def test_sweep_takes_eig_driver(yale_store, tmp_path):
    """eig_driver reaches every grid point's fit (it was the estimator's only)."""
    import json

    sweep(yale_store, tmp_path / "sw", alphas=[8.0], max_iter=3, min_iter=3, n_init=2, eig_driver="evd",
          progress=False)
    (run,) = (tmp_path / "sw" / "runs").iterdir()
    report = json.loads((run / "report.json").read_text())
    assert report["eig_drivers"] == ["evd"] * 3 and report["params"]["eig_driver"] == "evd"
