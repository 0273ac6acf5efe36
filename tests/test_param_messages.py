"""Messages that name parameters: Python spelling in ``str()``, flags on the command line.

The library raises and warns with a template and :class:`~lswmkc_dask.errors.Param`
markers; the CLI renders the same template with its flag table (read from the argparse
parser), never by rewriting text.
"""

from __future__ import annotations

import ast
import inspect
import pickle
import warnings
from pathlib import Path

import pytest

import lswmkc_dask.cli as cli
from lswmkc_dask import LSWMKC
from lswmkc_dask._validate import check_hyperparameters
from lswmkc_dask.cli import cli_message, flag_table, main
from lswmkc_dask.errors import (
    DegenerateKernelWarning,
    Message,
    Param,
    ParameterError,
    Verbatim,
    render_message,
    warn_at_caller,
    with_message,
)

PACKAGE = Path(cli.__file__).parents[1]  # the package (cli is a package of its own)


def test_parameter_error_rendered_both_ways():
    with pytest.raises(ValueError) as info:
        check_hyperparameters(10, n_clusters=1)
    exc = info.value
    assert isinstance(exc, ParameterError) and exc.parameter == "n_clusters"
    assert str(exc) == "n_clusters must be an integer in [2, n_samples - 1 = 9], got 1"
    assert cli_message(exc) == "--n-clusters must be an integer in [2, n_samples - 1 = 9], got 1"


def test_param_spellings():
    flags = {"overwrite": "--overwrite", "overwrite=True": "--overwrite", "header=False": "--no-header",
             "n_clusters": "--n-clusters", "eig_driver": "--eig-driver"}
    cases = [
        (Param("overwrite", True, hint="or"), "overwrite=True or --overwrite", "--overwrite"),
        (Param("header", False, hint="paren"), "header=False (--no-header)", "--no-header"),
        (Param("eig_driver", "auto"), "eig_driver='auto'", "--eig-driver auto"),
        (Param("n_clusters", Verbatim("k")), "n_clusters=k", "--n-clusters k"),
        (Param("cache_kernels", False), "cache_kernels=False", "cache_kernels=False"),  # no flag: Python kept
    ]
    for param, python, flag in cases:
        assert param.render() == python and param.render(flags) == flag


def test_sklearn_error_carries_its_parameter():
    from lswmkc_dask._validate import InvalidParameter

    with pytest.raises(InvalidParameter) as info:
        LSWMKC(n_init=0).fit("missing.zarr")
    exc = info.value
    assert isinstance(exc, ValueError) and isinstance(exc, ParameterError) and exc.parameter == "n_init"
    assert str(exc).startswith("The 'n_init' parameter of LSWMKC must be an int in the range [1, 10000]")
    assert cli_message(exc).startswith("--n-init must be an int in the range [1, 10000]")


def test_n_init_is_bounded_in_python_and_on_the_command_line(tmp_path):
    """n_init above 10,000 is refused by every entry point before any work (1000000000
    ran until killed), through the one row of the parameter table."""
    from _helpers import lswmkc_main

    from lswmkc_dask import sweep
    from lswmkc_dask.grid.baselines import avg_kkm
    from lswmkc_dask.grid.compare import compare

    message = r"'n_init' parameter of {} must be an int in the range \[1, 10000\]\. Got 1000000000"
    with pytest.raises(ParameterError, match=message.format("LSWMKC")):
        LSWMKC(n_init=10**9).fit("missing.zarr")
    with pytest.raises(ParameterError, match=message.format("sweep")):
        sweep("missing.zarr", tmp_path / "s", n_clusters=3, alphas=[1.0], n_init=10**9)
    with pytest.raises(ParameterError, match=message.format("compare")):
        compare("missing.zarr", tmp_path / "c", n_clusters=3, n_init=10**9)
    with pytest.raises(ParameterError, match=message.format("avg_kkm")):
        avg_kkm("missing.zarr", 3, n_init=10**9)
    for argv in (["fit", "--dataset", "yale", "--alpha", "8"],
                 ["sweep", "--dataset", "yale", "--alphas", "1", "--output", tmp_path / "s"],
                 ["compare", "--dataset", "yale", "--output", tmp_path / "c"]):
        proc = lswmkc_main(*argv, "--n-init", "1000000000")
        assert proc.returncode == 2, proc.stderr
        assert f"lswmkc {argv[0]}: error: argument --n-init: must be an integer in [1, 10000], got 1000000000" \
            in proc.stderr, proc.stderr
    assert not (tmp_path / "s").exists() and not (tmp_path / "c").exists()


def test_pickled_error_keeps_its_message():
    """Errors cross Dask as pickles: the template survives, braces in values included."""
    exc = ParameterError("{} must be one of {}, got {!r}", Param("mode"), "{a, b}", "c")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is ParameterError and str(back) == str(exc) and back.parameter == "mode"
    assert cli_message(back) == "--mode must be one of {a, b}, got 'c'"
    other = pickle.loads(pickle.dumps(with_message(FileExistsError, "x {}", Param("overwrite", True))))
    assert cli_message(other) == "x --overwrite"


def test_cli_keeps_paths_and_names_flags(tmp_path, capsys):
    """In process: a path holding Python keywords is printed as it is, the advice as flags."""
    out = tmp_path / "n_clusters=2 overwrite=True block_rows" / "out.zarr"
    out.mkdir(parents=True)
    assert main(["prepare", "--dataset", "yale", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"lswmkc: error: output {out} already exists (pass --overwrite to replace it)"


def test_cli_parameter_error_in_process(capsys):
    assert main(["fit", "--dataset", "yale", "--n-clusters", "165"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lswmkc: error: --n-clusters must be an integer in [2, n_samples - 1 = 164], got 165")
    assert "n_clusters" not in err


def test_cli_warning_names_flags(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = cli._show_warning
        warn_at_caller(with_message(DegenerateKernelWarning, "kernel 0 in /d/degenerate_kernels/: dropped it ({})",
                                    Param("degenerate_kernels", "drop")), DegenerateKernelWarning)
    err = capsys.readouterr().err
    assert err.strip() == "lswmkc: warning: kernel 0 in /d/degenerate_kernels/: dropped it (--degenerate-kernels drop)"


def test_flag_table_from_parser():
    table = flag_table()
    assert table["n_clusters"] == "--n-clusters" and table["overwrite"] == "--overwrite"
    assert table["header=False"] == "--no-header" and table["header=True"] == "--header"
    assert render_message(Message("{}", Param("label_column")), table) == "--label-column"


def test_no_text_rewriting_in_cli():
    """The CLI maps parameters by structure: no regex rules over message text come back."""
    for name in ("_MESSAGE_RULES", "_KEYWORD_FLAGS", "_WORD_FLAGS", "_NOT_PATH_BEFORE", "_NOT_PATH_AFTER"):
        assert not hasattr(cli, name), name
    assert "re." not in inspect.getsource(cli.cli_message) and "re." not in inspect.getsource(cli._show_warning)
    trees = [ast.parse(path.read_text()) for path in sorted(Path(cli.__file__).parent.glob("*.py"))]
    uses = [node for tree in trees for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re"]
    # the one regex left matches numpy's short-write text of an OSError, it rewrites nothing
    assert len(uses) == 1, [ast.unparse(u) for u in uses]


def test_every_named_parameter_has_a_flag():
    """Each ``Param("name")`` in the package names a flag of the CLI, or is Python-only on purpose."""
    # prepare(symmetry_tol=...): no flag; FitOptions(resident=...): the resident device route, not yet on the CLI
    python_only = {"verbose", "cache_kernels", "symmetry_tol", "resident"}
    names = set()
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "methods":  # the compared methods' hyper-parameters: `compare --grid METHOD:PARAM=V`
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Param" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                names.add(node.args[0].value)
    assert names, "no Param found"
    missing = sorted(names - set(flag_table()) - python_only)
    assert not missing, missing
