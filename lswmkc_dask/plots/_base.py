"""What every figure family shares: matplotlib (imported on first use), the output
directory (:func:`plot_directory`: where PNGs may be written and what replaced), saving
(:func:`save_figure`: atomic, signed as lswmkc's), small readers of a report and axis helpers.
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

from ..errors import MatplotlibMissingError, Param, with_message
from ..grid.sweep import SELECTION_CRITERION
from ..io import atomic_path
from ..io.atomic import ForeignOutputError, write_marker
from ..io.guards import ProtectedOutputError, check_writable, file_refusal, refuse_output_location
from ..io.ownership import MARKER, is_empty_dir, marker_info, png_is_ours, signature
from ..io.results import read_json, read_labels, summary_problem

METRIC_NAMES = ("ACC", "NMI", "Purity", "ARI")
DPI = 120
#: Every file :func:`plot_sweep` or :func:`plot_compare` may write.
PNG_NAMES = ("metrics_vs_alpha.png", "convergence.png", "kernel_weights.png", "affinity_heatmap.png",
             "kstar_heatmap.png", "selection.png", "compare.png", "gamma_ablation.png", "running_time.png",
             "weight_distributions.png", "evolution_heatmaps.png", "evolution_tsne.png", "knn_mechanism.png")
#: The files of a sweep directory's figures (:func:`plot_sweep`).
SWEEP_PNGS = (*PNG_NAMES[:6], "gamma_ablation.png", "evolution_heatmaps.png", "evolution_tsne.png")
#: The files of a fit directory's figures (:func:`plot_fit`).
FIT_PNGS = ("convergence.png", "kernel_weights.png", "affinity_heatmap.png", "kstar_heatmap.png",
            "evolution_heatmaps.png", "evolution_tsne.png")
#: The report of one fit (``lswmkc fit --output DIR``, a sweep's ``runs/alpha=A_c=C``).
FIT_REPORT = "report.json"


def plot_directory(directory, out, overwrite, names=PNG_NAMES):
    """The PNG directory, made ready; nothing that lswmkc did not write is replaced.

    A PNG of one of ``names`` is replaced only if lswmkc wrote it (its ``Software``
    chunk): in ``directory/plots`` and directories ``lswmkc plot`` created (its marker)
    always, elsewhere only with ``overwrite``. No marker is added to a directory lswmkc
    did not create (other commands' ``--overwrite`` would then replace it).

    Raises
    ------
    ForeignOutputError
        ``out`` is a file, or holds an entry of one of ``names`` that lswmkc did not
        write, or (without ``overwrite``, outside its own directories) one it did.
    ProtectedOutputError
        ``out`` is ``directory`` itself (the input), or inside a kernel store.
    OutputNotWritableError
        ``out`` (or where it would be created) cannot be written.
    """
    if out is None:
        out = directory / "plots"
    out = Path(out)
    refuse_output_location(out)  # never inside a kernel store (a sweep's own plots/ may be inside the sweep)
    if out.resolve() == Path(directory).resolve():
        raise ProtectedOutputError(f"refusing to write PNG files into the input {directory} itself; give another "
                                   f"output directory (the default is {Path(directory) / 'plots'})")
    if out == directory / "plots" and os.path.islink(out):  # planted: PNGs would land where it points
        raise ForeignOutputError(f"{out} is a symbolic link (to {os.readlink(out)}); lswmkc does not write its figures "
                                 "through it: remove it, or give --output DIR")
    if os.path.lexists(out) and not out.is_dir():
        raise ForeignOutputError(f"output {out} is a file; give a directory for the PNG files")
    ours = out == directory / "plots" or (out.is_dir() and (marker_info(out) or {}).get("kind") == "plots")
    if out.is_dir():
        for name in names:
            target = out / name
            if not os.path.lexists(target):
                continue
            refusal = file_refusal(target, png_is_ours)
            if refusal:
                raise ForeignOutputError(refusal.replace("output ", "", 1) + " (lswmkc plot replaces only PNG "
                                         "files it wrote)")
            if not ours and not overwrite:
                raise with_message(
                    ForeignOutputError, "{} exists ({} is not a directory of `lswmkc plot`); pass {} to replace it, "
                    "or choose another output directory", target, out, Param("overwrite", True, hint="or"),
                )
    check_writable(out, inside=True)
    fresh = not out.exists() or is_empty_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    if fresh and out != directory / "plots":
        write_marker(out, "plots")
    return out


@contextlib.contextmanager
def kept_only_if_complete(out):
    """Run the body, which draws figures into ``out``; if it fails (a full disk, Ctrl-C),
    remove the PNGs of :data:`PNG_NAMES` it added and ``out`` (with its marker) if it
    created it and it holds nothing else. PNGs it replaced stay replaced, each complete.
    """
    out = Path(os.path.abspath(out))
    existed = os.path.lexists(out)
    before = set(os.listdir(out)) if existed and out.is_dir() and not out.is_symlink() else set()
    created = [p for p in (out, *out.parents) if not os.path.lexists(p)]  # what mkdir(parents=True) may add
    try:
        yield
    except BaseException:
        if out.is_dir() and not out.is_symlink():
            for name in (*PNG_NAMES, *(() if existed else (MARKER,))):
                if name not in before and (out / name).is_file() and not (out / name).is_symlink():
                    with contextlib.suppress(OSError):
                        (out / name).unlink()
        for p in created:  # deepest first; only where empty
            try:
                p.rmdir()
            except OSError:
                break
        raise


def import_matplotlib():
    """Import the parts of matplotlib used here, with a helpful error if missing."""
    try:
        import matplotlib  # noqa: F401
        from matplotlib import colormaps
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MatplotlibMissingError(
            f"plotting needs matplotlib, which cannot be imported ({' '.join(str(exc).split())}): "
            "pip install matplotlib",
            name="matplotlib",
        ) from exc
    return Figure, FigureCanvasAgg, colormaps


def new_figure(figsize):
    """A matplotlib Figure of ``figsize`` inches at :data:`DPI`, on an Agg canvas."""
    Figure, FigureCanvasAgg, _ = import_matplotlib()
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig, path):
    """Write ``fig`` as PNG to ``path`` atomically, signed as lswmkc's (``Software`` chunk);
    an existing file is replaced only if signed.
    """
    with atomic_path(path, overwrite=True, owned=png_is_ours) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": signature()})
    return Path(path)


#: Labels of a ``sample,predicted_label`` / ``sample,true_label`` file in sample order
#: (:func:`lswmkc_dask.io.results.read_labels`).
read_labels_csv = read_labels


def recorded_choice(directory):
    """``summary.json``'s ``"selected"`` of the sweep ``directory`` (checked), or ``{}`` without one."""
    path = Path(directory) / "summary.json"
    if not os.path.lexists(path):
        return {}
    return read_json(path, summary_problem).get("selected") or {}


def _pow2_ticks(alphas):
    """The ticks of an alpha scale (at most about 12) and their labels, 2^k at powers of 2."""
    alphas = sorted(set(alphas))
    ticks = alphas[::max(1, math.ceil(len(alphas) / 12))]
    labels = []
    for a in ticks:
        k = math.log2(a) if a > 0 else float("nan")
        labels.append(f"$2^{{{round(k)}}}$" if abs(k - round(k)) < 1e-9 else f"{a:g}")
    return ticks, labels


def alpha_ticks(ax, alphas):
    """log2 x axis with ticks at the alphas, written 2^k where they are powers of 2."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(*_pow2_ticks(alphas))
    ax.minorticks_off()
    if len(set(alphas)) == 1:
        ax.set_xlim(min(alphas) / 2, min(alphas) * 2)


def metric_value(report, protocol, name, k=None):
    """A metric of a run: at k ``k`` when given and the run has a k grid, else at its own k."""
    if k is not None and report.get("by_n_clusters"):
        report = report["by_n_clusters"].get(str(k)) or {}
    v = (report.get("metrics") or {}).get(protocol, {}).get(name)
    return float("nan") if v is None else float(v)


def runs_by_c(runs):
    """``{c: [(alpha, report), ...] sorted by alpha}``."""
    out: dict[int, list[tuple[float, dict]]] = {}
    for p, r in runs.items():
        out.setdefault(p.n_neighbors, []).append((p.alpha, r))
    return {c: sorted(v, key=lambda t: t[0]) for c, v in sorted(out.items())}


def alpha_colours(alphas, colormaps):
    """``(mappable, alpha -> RGBA)``: viridis over log2 of ``alphas``."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    logs = [math.log2(a) for a in alphas]
    lo, hi = min(logs), max(logs)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    sm = ScalarMappable(norm=Normalize(lo, hi), cmap=colormaps["viridis"])
    # matplotlib's stub types x as ndarray, narrower than to_rgba, which maps array-likes and scalars
    # (a float gives one RGBA tuple, Colormap.__call__)
    return sm, (lambda a: sm.to_rgba(math.log2(a)))  # type: ignore[arg-type]


def log2_colorbar(fig, sm, ax, alphas):
    """A colour bar of ``sm`` beside ``ax``, ticked at powers of two of ``alphas``."""
    ticks, labels = _pow2_ticks(alphas)
    fig.colorbar(sm, ax=ax, pad=0.02, label=r"$\alpha$").set_ticks([math.log2(a) for a in ticks], labels=labels)


def kernel_names_of(config, m):
    """The names of the ``m`` kernels in ``config``, else "kernel 0" ..."""
    names = config.get("kernel_names")
    if isinstance(names, (list, tuple)) and len(names) == m:
        return [str(x) for x in names]
    return [f"kernel {p}" for p in range(m)]


def k_scores(report):
    """``{k: label-free score}`` of one run: every k of a k grid, else its one k."""
    per_k = report.get("by_n_clusters") or {str(report.get("params", {}).get("n_clusters")): report}
    return {int(k): (e.get("label_free") or {}).get(SELECTION_CRITERION, math.nan) for k, e in per_k.items()
            if k != "None"}


def run_k_values(report):
    """The k values of a run: its k grid (``by_n_clusters``), else its one k."""
    per_k = report.get("by_n_clusters")
    if per_k:
        return sorted(int(k) for k in per_k)
    k = (report.get("params") or {}).get("n_clusters")
    return [] if k is None else [int(k)]


def data_name(data, directory):
    """The name of the data for a title: ``yale`` for ``dataset yale``, a file's or store's own name
    (``./k.npz`` is ``k.npz``), else (an array) the name of ``directory``.
    """
    data = str(data or "")
    if data.startswith("dataset "):
        return data.split(" ", 1)[1]
    return Path(data.rstrip("/")).name if data and data != "array" else Path(os.path.abspath(directory)).name


def k_note(k, reason, width=90):
    """The title line(s) that say which k a figure shows and why."""
    import textwrap

    return textwrap.fill(f"k={k}: {reason}" if reason else f"k={k}", width)
