"""One progress facility (lswmkc_dask.engine.progress): what writes to the user, and one switch.

Progress lines go to the standard error current when they are written (a test's or a
notebook's), the result table to standard output, nothing at all when switched off; no
other module of the package prints but the command line and the listed exceptions.
"""

from __future__ import annotations

import ast
import io
import logging
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from lswmkc_dask import LSWMKC, ClusterWarning
from lswmkc_dask._logging import CurrentStderr, command_line_output
from lswmkc_dask.engine.progress import Progress, grid_point_line
from lswmkc_dask.grid.sweep import sweep, sweep_table

PACKAGE = Path(__file__).resolve().parents[1] / "lswmkc_dask"
QUICK = {"max_iter": 3, "min_iter": 2, "n_init": 2}

#: ``print`` calls allowed outside the command line and the progress module, with the reason.
PRINTS = {
    "engine/scheduler.py": "a warning (a wait for workers, a lost connection) to the stream the caller gives",
    "_params.py": "`python -m lswmkc_dask._params` prints the docs table (command output)",
}


def _prints(path):
    tree = ast.parse(path.read_text())
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"]


def test_only_the_progress_module_and_the_command_line_print():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel in ("engine/progress.py", "cli.py") or rel.startswith("cli/"):
            continue
        lines = _prints(path)
        if lines:
            found[rel] = lines
    unlisted = {k: v for k, v in found.items() if k not in PRINTS}
    assert not unlisted, f"print() outside lswmkc_dask/engine/progress.py and the command line: {unlisted}"


def test_one_switch_and_the_streams_of_the_moment(capsys):
    Progress(False).say("hidden")
    Progress(False).result("hidden")
    Progress(False).grid_point(1, 2, SimpleNamespace(name="alpha=1_c=5"),
                               {"n_iter": 3, "iteration_seconds_total": 0.5}, 0.0)
    Progress(False).iteration(1, -1.0, 0.5, 0.1)
    assert capsys.readouterr() == ("", "")
    Progress().say("a stage")
    Progress().result("the table")
    Progress().iteration(3, -12.5, 0.25, 0.5)
    out, err = capsys.readouterr()
    assert out == "the table\n"
    assert err.splitlines() == ["a stage", "iter   3  objective -12.5  ||K*_t - K*_t-1|| 0.25  0.50 s"]
    stream = io.StringIO()
    Progress(err=stream).say("elsewhere")
    assert stream.getvalue() == "elsewhere\n" and capsys.readouterr() == ("", "")


def test_a_restart_is_a_warning_whatever_the_switch():
    """A restart after a lost worker is shown to a Python user who set up no logging: a
    warning, not a log record (the package's NullHandler would hide a WARNING record)."""
    with pytest.warns(ClusterWarning) as caught:
        Progress(False).iteration(4, 0.0, 0.0, 0.0, restarted="restarted from iteration 3 (a worker was lost)")
    assert [str(w.message) for w in caught] == ["restarted from iteration 3 (a worker was lost)"]
    assert caught[0].filename == __file__  # attributed to the caller's line, not the package's


def test_importing_the_package_installs_no_log_handler():
    logger = logging.getLogger("lswmkc_dask")
    assert [type(h) for h in logger.handlers] == [logging.NullHandler]
    assert logger.level == logging.NOTSET and logger.propagate


def test_importing_the_package_leaves_logging_alone_in_a_fresh_process():
    code = ("import logging; root = logging.getLogger(); before = (list(root.handlers), root.level); "
            "import lswmkc_dask; log = logging.getLogger('lswmkc_dask'); "
            "print([type(h).__name__ for h in log.handlers], log.level, log.propagate, "
            "(list(root.handlers), root.level) == before)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[0] == "['NullHandler'] 0 True True"


def test_the_command_line_shows_the_records_while_it_runs(capsys):
    logger = logging.getLogger("lswmkc_dask")
    with command_line_output():
        with command_line_output():  # nested (main called inside a run): no second handler
            logging.getLogger("lswmkc_dask.plots._knn").info("a figure not drawn")
        logging.getLogger("lswmkc_dask.engine.fit").debug("below INFO")
        assert sum(isinstance(h, CurrentStderr) for h in logger.handlers) == 1
    logging.getLogger("lswmkc_dask.engine.fit").info("after the run: not shown")
    assert capsys.readouterr() == ("", "lswmkc: a figure not drawn\n")
    assert [type(h) for h in logger.handlers] == [logging.NullHandler]
    assert logger.level == logging.NOTSET and logger.propagate


def test_grid_point_line_bar_and_k_grid():
    line = grid_point_line(3, 12, SimpleNamespace(name="alpha=4_c=5"),
                           {"n_iter": 7, "iteration_seconds_total": 2.04, "metrics": {"honest": {"ACC": 0.5}},
                            "by_n_clusters": {"2": {}, "3": {}}, "params": {"n_clusters": 2}}, 0.0)
    assert line.startswith("[#####...............] 3/12 alpha=4_c=5: 7 it, 2.0 s, ACC 0.5000 at k=2 (the run's k")
    assert re.search(r"\| elapsed \d+ s, ETA \d+ s$", line)


def test_estimator_verbose_is_the_switch(yale_store, capsys):
    LSWMKC(n_clusters=15, verbose=1, **QUICK).fit(yale_store)
    out, err = capsys.readouterr()
    assert out == "" and len(re.findall(r"^iter +\d+  objective ", err, flags=re.M)) >= 2
    LSWMKC(n_clusters=15, verbose=0, **QUICK).fit(yale_store)
    assert capsys.readouterr() == ("", "")


@pytest.mark.timeout(120)
def test_sweep_progress_goes_to_the_streams_of_the_moment(yale_store, tmp_path, capsys):
    summary = sweep(yale_store, tmp_path / "quiet", alphas=[1, 8], progress=False, **QUICK)
    assert capsys.readouterr() == ("", "")
    again = sweep(yale_store, tmp_path / "shown", alphas=[1, 8], progress=True, **QUICK)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines[0] == "sweep: 2 of 2 grid points to run (0 done), in this process"
    assert [re.match(r"\[[#.]{20}\] (\d)/2 alpha=(\d)_c=5: ", x).groups() for x in lines[1:]] == [("1", "1"),
                                                                                                ("2", "8")]
    assert out == sweep_table(again["rows"], again["selected"]) + "\n"  # the result, on stdout
    assert [r["ACC_honest"] for r in summary["rows"]] == [r["ACC_honest"] for r in again["rows"]]
