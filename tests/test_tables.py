"""Tables for a paper (`lswmkc table DIR --format latex|markdown`): parsed back, their
numbers equal compare.json's / summary.json's, the best of each row in bold."""

from __future__ import annotations

import json
import re

import pytest

from lswmkc_dask import cli
from lswmkc_dask.grid.compare import compare, comparison_table
from lswmkc_dask.report.metrics import METRICS, PROTOCOLS
from lswmkc_dask.grid.sweep import sweep
from lswmkc_dask.grid.tables import format_table, sweep_columns

pytestmark = pytest.mark.timeout(600)
FAST = {"max_iter": 5, "min_iter": 2, "n_init": 5, "progress": False}


@pytest.fixture(scope="module")
def compared(yale, tmp_path_factory):
    kernels, labels = yale
    out = tmp_path_factory.mktemp("tables") / "cmp"
    compare(kernels, out, labels=labels, alphas=[1.0, 8.0], taus=[0.3, 0.6], **FAST)
    return out


@pytest.fixture(scope="module")
def swept(yale, tmp_path_factory):
    kernels, labels = yale
    out = tmp_path_factory.mktemp("tables") / "sw"
    sweep(kernels, out, labels=labels, alphas=[1.0, 8.0, 64.0], **FAST)
    return out


def _parse_latex(text):
    """The tabular's column spec, header cells and body rows {(protocol, metric): [cells]}."""
    spec = re.search(r"\\begin\{tabular\}\{([^}]*)\}", text).group(1)
    body = text[text.index(r"\begin{tabular}"):text.index(r"\end{tabular}")]
    rows, protocol = {}, None
    lines = [line.strip() for line in body.splitlines()[1:] if line.strip() and line.strip() != r"\hline"]
    header = lines[0]
    for line in lines[1:]:
        assert line.endswith(r"\\"), line
        m = re.match(r"\\multicolumn\{(\d+)\}\{l\}\{\\emph\{(\w+) protocol\}\}", line)
        if m:
            assert int(m.group(1)) == len(spec)
            protocol = m.group(2)
            continue
        cells = [c.strip() for c in line[:-2].split("&")]
        assert len(cells) == len(spec), line  # each row: the label and one cell per column
        rows[(protocol, cells[0].split(" ")[0])] = cells[1:]
    return spec, header, rows


def _value(cell):
    bold = cell.startswith(r"\textbf{")
    return float(cell.removeprefix(r"\textbf{").removesuffix("}")), bold


def test_latex_table_of_a_compare_directory(compared):
    text = format_table(*[_columns_of(compared)], "latex", caption="YALE")
    spec, header, rows = _parse_latex(text)
    table = comparison_table(compared)
    assert spec == "l" + "c" * len(table)
    assert header.count("&") == len(table)
    assert set(rows) == {(p, m) for p in PROTOCOLS for m in METRICS}
    for (protocol, metric), cells in rows.items():
        values = [_value(c) for c in cells]
        expected = [round(100 * r[f"{metric}_{protocol}"], 2) for r in table]
        assert [v for v, _ in values] == pytest.approx(expected, abs=1e-9)
        top = max(v for v, _ in values)
        assert [b for _, b in values] == [v == top for v, _ in values]  # the best of the row, ties included, bold


def _columns_of(directory):
    from lswmkc_dask.grid.tables import table_of

    return table_of(directory)


def test_markdown_and_cli_of_a_sweep_directory(swept, capsys):
    summary = json.loads((swept / "summary.json").read_text())
    assert cli.main(["table", str(swept), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("|")]
    head, rule, body = lines[0], lines[1], lines[2:]
    columns = sweep_columns(swept)
    assert head.count("|") == len(columns) + 3 and rule.count("|") == len(columns) + 3
    assert len(body) == len(PROTOCOLS) * len(METRICS)
    chosen = summary["selected"]
    row = next(r for r in summary["rows"] if (r["alpha"], r["n_neighbors"]) == (chosen["alpha"], chosen["n_neighbors"]))
    acc = next(line for line in body if line.startswith("| honest | ACC"))
    first = acc.split("|")[3].strip().strip("*")
    assert float(first) == round(100 * row["ACC_honest"], 2)
    best = summary["best_by_honest_ACC"]["ACC_honest"]
    assert f"**{100 * best:.2f}**" in acc


def test_cli_latex_of_a_compare_directory_and_bad_input(compared, tmp_path, capsys):
    assert cli.main(["table", str(compared)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(r"\begin{table}") and r"\caption{Clustering results on" in out
    _parse_latex(out)
    with pytest.raises(ValueError, match="format must be one of"):
        format_table(_columns_of(compared), "html")
    assert cli.main(["table", str(tmp_path)]) != 0  # neither a sweep nor a compare directory
    assert "not a finished sweep directory" in capsys.readouterr().err


def test_running_times_and_weight_distributions(compared, tmp_path):
    from lswmkc_dask.grid.compare import load_compare, running_times, weight_distributions

    table = {r["method"]: r["seconds"] for r in comparison_table(compared)}
    times = running_times(compared)
    assert [t[0] for t in times] == list(table)
    for method, seconds, ratio in times:
        assert seconds == table[method] and ratio == pytest.approx(table[method] / table["LSWMKC"], rel=1e-12)
    with pytest.raises(ValueError, match="is not a method"):
        running_times(compared, reference="nope")
    names, weights = weight_distributions(compared)
    _, runs, lsw = load_compare(compared)
    mkkm = runs["mkkm"]["kernel_weights"]
    assert weights["MKKM"] == pytest.approx([w / sum(mkkm) for w in mkkm], abs=1e-12)
    best = max(lsw.values(), key=lambda r: r["metrics"]["honest"]["ACC"])
    assert weights["LSWMKC"] == pytest.approx([w / sum(best["kernel_weights"]) for w in best["kernel_weights"]],
                                              abs=1e-12)
    assert len(names) == len(mkkm)
    pytest.importorskip("matplotlib")
    from lswmkc_dask.plots import plot_sweep

    written = plot_sweep(compared, tmp_path / "png")
    assert [p.name for p in written] == ["compare.png", "running_time.png", "weight_distributions.png"]
    for p in written:
        assert p.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_table_output_file_is_signed_and_replaced_only_with_overwrite(swept, tmp_path, capsys):
    target = tmp_path / "t.tex"
    assert cli.main(["table", str(swept), "--output", str(target)]) == 0
    text = target.read_text()
    assert text.startswith("% written by lswmkc-dask") and r"\begin{tabular}" in text
    assert cli.main(["table", str(swept), "--output", str(target)]) != 0  # exists: --overwrite needed
    assert cli.main(["table", str(swept), "--output", str(target), "--overwrite", "--format", "markdown"]) == 0
    assert target.read_text().startswith("<!-- written by lswmkc-dask") and "| protocol |" in target.read_text()
    foreign = tmp_path / "mine.tex"
    foreign.write_text("my paper\n")
    assert cli.main(["table", str(swept), "--output", str(foreign)]) != 0
    assert foreign.read_text() == "my paper\n"
    assert cli.main(["table", str(swept), "--output", str(foreign), "--overwrite"]) == 0  # any regular file
    assert foreign.read_text().startswith("% written by lswmkc-dask")
    link = tmp_path / "link.tex"
    link.symlink_to(foreign)
    assert cli.main(["table", str(swept), "--output", str(link), "--overwrite"]) != 0  # never a link
    assert link.is_symlink() and foreign.read_text().startswith("% written by lswmkc-dask")
    capsys.readouterr()


def test_the_consensus_of_near_ties_gets_its_column_when_it_is_another_point(swept, tmp_path):
    import shutil

    out = tmp_path / "sw"
    shutil.copytree(swept, out)
    summary = json.loads((out / "summary.json").read_text())
    chosen = summary["selected"]
    assert "consensus" in chosen  # the sweep reports it
    titles = [t for t, _ in sweep_columns(out)]
    same = chosen["consensus"]["alpha"] == chosen["alpha"]
    assert any(t.startswith("consensus") for t in titles) == (not same)
    other = next(r for r in summary["rows"] if r["alpha"] != chosen["alpha"])
    chosen["consensus"] = {k: other[k] for k in ("alpha", "n_neighbors", "n_clusters", "gamma")}
    (out / "summary.json").write_text(json.dumps(summary))
    columns = dict(sweep_columns(out))
    (title,) = [t for t in columns if t.startswith("consensus of near-ties (no labels)|")]
    assert f"alpha={other['alpha']:g}" in title and columns[title]["ACC_honest"] == other["ACC_honest"]
