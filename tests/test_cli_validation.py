"""The command line checks its options once, before any input is read, through the
parameter table's constraints (the path the Python entry points take), and names the
flags in what it says.

In process (``lswmkc_dask.cli.main``), on an INPUT that does not exist: an option that
is checked first is refused with its own message, not "input file not found".
"""

from __future__ import annotations

import pytest

from lswmkc_dask._params import ROWS
from lswmkc_dask.cli import build_parser, main
from lswmkc_dask.cli._base import ENTRY_OF, table_params
from lswmkc_dask.estimator import check_params


def _refused(capsys, argv):
    """The one error line of ``lswmkc ARGV`` (exit 2), checked to come before any I/O."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "input file not found" not in err and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("command", ["fit", "sweep", "compare"])
@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_random_state_range_before_any_input(command, seed, capsys, tmp_path):
    """A seed outside numpy's range is refused by its flag, in the command line's words
    (not scikit-learn's, which named ``numpy.random.mtrand.RandomState``), before INPUT
    is opened or the output directory made."""
    out = tmp_path / "out"
    line = _refused(capsys, [command, str(tmp_path / "missing.mat"), "--random-state", seed, "--output", str(out)])
    assert line == f"lswmkc {command}: error: argument --random-state: must be an integer in [0, 4294967295], got {seed}"
    assert not out.exists()


def test_compare_taus_before_any_input(capsys, tmp_path):
    line = _refused(capsys, ["compare", str(tmp_path / "missing.mat"), "--taus", "0.5", "1.5", "--output",
                             str(tmp_path / "out")])
    assert line == "lswmkc compare: error: tau must be a number in (0, 1], got 1.5"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["fit", "sweep", "compare"])
def test_tls_without_a_scheduler_is_refused(command, capsys, tmp_path):
    """TLS files mean a tls:// scheduler: without --scheduler/--scheduler-file they were
    ignored by sweep and compare, and refused by fit only once the input was read."""
    line = _refused(capsys, [command, str(tmp_path / "missing.mat"), "--tls-cert", "c.pem", "--output",
                             str(tmp_path / "out")])
    assert line == f"lswmkc {command}: error: --tls-ca-file/--tls-cert/--tls-key need --scheduler or --scheduler-file"


def test_options_map_to_the_entry_points_parameters():
    """Each command's options, by their Python names, are the rows its entry point takes
    (grid flags aside), and their defaults pass the entry point's own check."""
    subs = {a.dest: a for a in build_parser()._actions}["command"].choices
    for command, entry in ENTRY_OF.items():
        args = subs[command].parse_args(["--output", "o"] if command != "prepare" else [])
        args.command = command
        params = table_params(args, command)
        grids = {r.name for r in ROWS if r.grid is not None and command in r.grid.commands
                 and r.grid.flag.lstrip("-").replace("-", "_") != r.name}
        want = {r.name for r in ROWS if entry in r.python and command in r.commands} - grids
        assert set(params) == want, command
        check_params(entry, {k: v for k, v in params.items() if v is not None})
