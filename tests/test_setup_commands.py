"""The README's set-up is two commands on a fresh machine: one installs
the package and runs the main job on the shipped data, one installs what the tests need
and runs all of them (lint, types, both tiers) -- the command ``.ci/run`` runs -- and a
test tier that collects nothing fails instead of passing."""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest
from _helpers import ROOT, env

from lswmkc_dask.cli import main

SCRIPT = ROOT / "tests" / "run-all.sh"


def _setup_commands():
    """The commands of the README's set-up section (code lines that are not comments)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    lines = [ln.split(" #", 1)[0].strip() for b in blocks for ln in b.replace("\\\n", " ").splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def test_readme_setup_is_two_commands_and_ci_runs_the_second(capsys):
    commands = _setup_commands()
    assert len(commands) == 2, commands
    install, job = (part.strip() for part in commands[0].split("&&"))
    assert install == "pip install ."
    args = shlex.split(job)
    assert args[:3] == ["lswmkc", "fit", "--dataset"], job  # shipped data, nothing to download
    assert main(args[1:]) == 0  # the main job, as the README gives it
    assert "metrics, honest  ACC" in capsys.readouterr().out
    assert commands[1] == "tests/run-all.sh"
    assert os.access(SCRIPT, os.X_OK) and os.access(ROOT / ".ci" / "run", os.X_OK)
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.startswith(("#", "set "))]
    assert ci == ['exec "$(dirname "$0")/../tests/run-all.sh" "$@"'], ci
    script = SCRIPT.read_text()
    assert 'pip install -e ".[test,lint,docs]"' in script  # the docs extra: CI builds the site
    for step in ("ruff check lswmkc_dask tests benchmarks cluster", "mypy", 'tiers=("not integration" "integration")',
                 'python -m sphinx -W --keep-going -q -b html docs "$site"'):
        assert step in script, step


@pytest.mark.integration
def test_a_tier_without_tests_fails(tmp_path):
    """pytest's exit 5 (no tests collected) ends the script with 5 and says so."""
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--no-install", "--fast", "-k", "no_test_has_this_name", "-p", "no:cacheprovider"],
        capture_output=True, text=True, check=False, timeout=600, env=env(), cwd=tmp_path,
    )
    assert proc.returncode == 5, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert 'run-all: the tier -m "not integration" collected no tests (pytest exit 5)' in proc.stderr, proc.stderr
    assert "== ruff" in proc.stderr and "== mypy" in proc.stderr  # lint and types ran first
    assert "passed" not in proc.stderr.splitlines()[-1]
