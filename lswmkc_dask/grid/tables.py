"""Metric tables laid out as the paper lays them out, in LaTeX or Markdown (``lswmkc table``).

Methods in columns, metrics (ACC, NMI, Purity, ARI) in rows, in percent, the best of each
row in bold, one block per evaluation protocol: :func:`compare_columns` reads the columns
from a compare directory, :func:`sweep_columns` from a sweep directory, :func:`format_table`
writes the table (``mean ± std`` over the k-means seeds where the runs were repeated).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import Param, Verbatim, with_message
from ..io.output import signature
from ..report.metrics import METRICS, PROTOCOLS
from .compare import COMPARE_FILE, comparison_table
from .results import read_summary
from .sweep import SELECTION_CRITERION

#: Output formats of :func:`format_table`.
FORMATS = ("latex", "markdown")


def compare_columns(directory: str | os.PathLike[str]) -> list[tuple[str, dict[str, Any]]]:
    """The columns of a compare directory: each method at its best grid point.

    Parameters
    ----------
    directory : str or Path
        Written by ``lswmkc compare`` (``compare.json`` and ``runs/``).

    Returns
    -------
    list of (str, dict)
        ``(title, {"ACC_honest": ..., ..., "ARI_paper": ...})`` per method, in the
        order of :data:`lswmkc_dask.grid.compare.METHODS`; fractions in [0, 1] (None where
        missing), with repeats also ``ACC_honest_mean``, ``ACC_honest_std``, ...

    Raises
    ------
    FileNotFoundError
        Not a compare directory.
    ValueError
        The comparison ran without labels; the message says how to get metrics.
    """
    columns = [(r["method"], _values(r)) for r in comparison_table(directory)]
    if columns and not _has_metrics(columns):
        raise _no_metrics(directory, "comparison")
    return columns


def _values(row):
    """The metric cells of one row: ``ACC_honest`` ..., with repeats ``ACC_honest_mean``, ``_std`` ..."""
    out = {}
    for key in (f"{m}_{p}" for p in PROTOCOLS for m in METRICS):
        out[key] = row.get(key)
        if row.get(f"{key}_mean") is not None:
            out[f"{key}_mean"] = row[f"{key}_mean"]
            out[f"{key}_std"] = row.get(f"{key}_std")
    return out


def sweep_columns(directory: str | os.PathLike[str]) -> list[tuple[str, dict[str, Any]]]:
    """The columns of a sweep directory: the selected grid point and the best ones.

    Parameters
    ----------
    directory : str or Path
        Written by ``lswmkc sweep`` (``summary.json``).

    Returns
    -------
    list of (str, dict)
        ``"selected (no labels)"`` (``"selected (no labels; k not determined)"``),
        ``"consensus of near-ties (no labels)"`` (where it is another grid point), ``"best by
        honest ACC"``, ``"best by paper ACC"``, those the summary has, each with the metrics
        of its row (fractions in [0, 1]); the title names alpha, c and k.

    Raises
    ------
    FileNotFoundError
        No ``summary.json`` in ``directory``.
    ValueError
        The sweep ran without labels; the message says how to get metrics.
    """
    summary = read_summary(directory)
    rows = summary.get("rows") or []
    columns = []
    chosen = summary.get("selected") or {}
    consensus = chosen.get("consensus")
    if consensus and all(consensus.get(k) == chosen.get(k) for k in ("alpha", "n_neighbors", "n_clusters")):
        consensus = None  # the selected point itself: no second column
    # k not determined (summary.json "k_determined" false): the starred point's k is the silhouette's, not a choice
    selected = "selected (no labels" + ("; k not determined)" if chosen.get("k_determined") is False else ")")
    for point, title in ((chosen, selected), (consensus, "consensus of near-ties (no labels)"),
                         (summary.get("best_by_honest_ACC"), "best by honest ACC"),
                         (summary.get("best_by_paper_ACC"), "best by paper ACC")):
        if not point:
            continue
        row = next((r for r in rows if (r["alpha"], r["n_neighbors"]) == (point["alpha"], point["n_neighbors"])
                    and r.get("n_clusters", point.get("n_clusters")) == point.get("n_clusters", r.get("n_clusters"))),
                   None)
        if row is None:
            continue
        where = f"alpha={row['alpha']:g}, c={row['n_neighbors']}, k={row.get('n_clusters', '?')}"
        columns.append((f"{title}|{where}", _values(row)))
    if not _has_metrics(columns):
        raise _no_metrics(directory, "sweep", f", only the label-free score ({SELECTION_CRITERION}) and no best grid "
                                              "point by ACC")
    return columns


def _has_metrics(columns):
    return any(v is not None for _, values in columns for v in values.values())


def _no_metrics(directory, kind, holds=""):
    """The error for a ``kind`` directory ("sweep", "compare") that ran without labels, and how to get metrics."""
    return with_message(
        ValueError, "{} has no metrics to tabulate: the {} ran without labels, so it holds no ACC, NMI, Purity or "
        "ARI (the rows of the table){}. To get them, run the {} again with the ground truth, {}, into a new {} (or "
        "with {}): the labels are part of the data a {} resumes on, so this directory cannot take them",
        directory, kind, holds, kind, Param("labels", Verbatim("FILE")), Param("output", Verbatim("DIR")),
        Param("overwrite", True), kind,
    )


def table_of(directory: str | os.PathLike[str]) -> list[tuple[str, dict[str, Any]]]:
    """:func:`compare_columns` or :func:`sweep_columns`, by what ``directory`` holds.

    Raises
    ------
    FileNotFoundError
        Neither a compare nor a finished sweep directory.
    """
    if (Path(directory) / COMPARE_FILE).is_file():
        return compare_columns(directory)
    return sweep_columns(directory)


def _cells(columns, key, pm, bold):
    """The cells of one row in percent (2 decimals, ``mean{pm}std`` with repeats), the best as ``bold``
    (a format): the largest value shown first, compared as printed.
    """
    text, lead = [], []
    for _, v in columns:
        repeated = v.get(f"{key}_mean") is not None
        value = v[f"{key}_mean"] if repeated else v.get(key)
        std = v.get(f"{key}_std") if repeated else None
        head = "-" if value is None else f"{100.0 * value:.2f}"
        text.append(head + ("" if std is None else f"{pm}{100.0 * std:.2f}"))
        lead.append(None if value is None else float(head))
    best = max((x for x in lead if x is not None), default=None)
    return [bold.format(t) if x is not None and x == best else t for t, x in zip(text, lead, strict=True)]


def format_table(
    columns: Sequence[tuple[str, Mapping[str, Any]]], fmt: str = "latex", caption: str | None = None
) -> str:
    r"""The metrics table: methods in columns, metrics in rows, in percent, best in bold.

    Parameters
    ----------
    columns : list of (str, dict)
        From :func:`compare_columns` or :func:`sweep_columns`; a title may carry a
        second line after ``|`` (shown below it).
    fmt : {"latex", "markdown"}
    caption : str, optional
        The LaTeX caption / a Markdown line above the table.

    Returns
    -------
    str
        LaTeX: a ``table`` environment with one ``tabular``, a block per protocol;
        Markdown: a pipe table with the protocol in each row's first cell. Values are
        ``100 x`` the metric with 2 decimals (``mean ± std`` with repeats), the largest of
        each row (ties included) in bold.

    Raises
    ------
    ValueError
        Unknown ``fmt``, or no columns.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if not columns:
        raise ValueError("no columns to tabulate")
    titles = [t.split("|") for t, _ in columns]
    if fmt == "markdown":
        head = "| protocol | metric | " + " | ".join(" ".join(t) for t in titles) + " |"
        lines = ([caption, ""] if caption else []) + [head, "|---|---|" + "---:|" * len(columns)]
        for protocol in PROTOCOLS:
            for m in METRICS:
                cells = _cells(columns, f"{m}_{protocol}", " ± ", "**{}**")
                lines.append(f"| {protocol} | {m} (%) | " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"
    n = len(columns)
    head = " & " + " & ".join(_latex_title(t) for t in titles) + r" \\"
    lines = [r"\begin{table}[t]", r"\centering"] + ([r"\caption{" + _latex_escape(caption) + "}"] if caption else [])
    lines += [r"\begin{tabular}{l" + "c" * n + "}", r"\hline", head, r"\hline"]
    for i, protocol in enumerate(PROTOCOLS):
        if i:
            lines.append(r"\hline")
        lines.append(r"\multicolumn{" + str(n + 1) + "}{l}{\\emph{" + protocol + r" protocol}} \\")
        for m in METRICS:
            cells = _cells(columns, f"{m}_{protocol}", r" $\pm$ ", r"\textbf{{{}}}")
            lines.append(f"{m} (\\%) & " + " & ".join(cells) + r" \\")
    lines += [r"\hline", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def signed_table(text: str, fmt: str) -> str:
    """``text`` with a first line naming this package (and its version).

    Parameters
    ----------
    text : str
        From :func:`format_table`.
    fmt : {"latex", "markdown"}

    Returns
    -------
    str
        A LaTeX comment (``% written by lswmkc-dask X``) or an HTML comment for Markdown,
        then ``text``.
    """
    head = f"% written by {signature()}" if fmt == "latex" else f"<!-- written by {signature()} -->"
    return head + "\n" + text


def _latex_escape(text):
    out = str(text)
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("#", r"\#"), ("_", r"\_")):
        out = out.replace(a, b)
    return out


def _latex_title(parts):
    """A column title; a second line (alpha, c, k) in a small shortstack."""
    if len(parts) == 1:
        return _latex_escape(parts[0])
    second = _latex_escape(parts[1]).replace("alpha=", r"$\alpha$=")
    return r"\shortstack{" + _latex_escape(parts[0]) + r"\\ \scriptsize " + second + "}"
