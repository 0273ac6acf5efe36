"""Fourth round of the label-free choice of alpha: every criterion and rule against keeping the default.

Issue 52: the alpha a sweep recommends must beat keeping the default alpha = 1, which the
recommendation replaces. On sets not used by the earlier rounds (declared in :data:`SETS`
before any sweep on them ran) one sweep per set (alpha = 2^0..2^10, the true k, c = 5,
``random_state=0``; labels given to the sweep for the metrics only) is run with the package
and cached under ``--cache``; then for every grid point, WITHOUT the labels: the shipped
silhouette on the average kernel and its per-sample values, the two votes, AutoSC's relative
eigen-gap of Z's normalised Laplacian (:func:`lswmkc_dask.grid.selection.relative_eigengap`)
and the silhouette of the embedding clustered with five more k-means seeds. Every criterion
(the argmax of a score) and every rule (the default kept unless ...) picks one alpha per set;
the labels score the picks afterwards: regret against the grid's best honest ACC, within 2
points, and the loss against keeping the default (positive: worse than alpha = 1).

    python benchmarks/selection_round4.py                            # 13 new sets + YALE, ~25 min on 2 cores
    python benchmarks/selection_round4.py --politicsuk PATH/politicsuk_3view_Kmatrix.mat
    python benchmarks/selection_round4.py --sets syn13 mf_fou_kar    # any subset (sweeps cached)

Raw per-set results: ``benchmarks/output/selection_round4/<set>.json`` (``--output``).
YALE and politicsuk were seen by the earlier rounds; they are reported apart and in the
totals "all", never counted among the new sets.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_selection import synthetic_views  # noqa: E402
from lswmkc_dask.engine.postprocess import factor_embeddings, kmeans_best_of  # noqa: E402
from lswmkc_dask.io.run_arrays import read_silhouettes, run_arrays  # noqa: E402
from lswmkc_dask.grid.selection import (  # noqa: E402
    default_decision,
    finish_partition_scores,
    near_ties,
    partition_scores_block,
    relative_eigengap,
)
from lswmkc_dask.kernels.features import kernels_from_features, preprocess_kernels  # noqa: E402

ALPHAS = [2.0**k for k in range(11)]
DEFAULT_ALPHA = 1.0
#: The rule lswmkc_dask.grid.sweep.weigh_default ships (the one below never 2 points worse than the default).
SHIPPED = "RULE AutoSC argmax, if its silhouette win > 1 SE (shipped)"
SEEDS = (1, 2, 3, 4, 5)  # the extra k-means seeds of the seed-spread rule (n_init 10 each)

#: Declared before any sweep on them ran. Views of scikit-learn's bundled sets split anew
#: (other splits and subsamples than rounds 1-3), UCI mfeat view subsets (500 samples,
#: 50 per digit, seed 0), and synthetic views with known structure plus noise views (new
#: seeds and shapes; the generator of bench_selection.py).
SETS = {
    "digits_lr": ("digits: 500 (50 per class), image columns 0-3 / 4-7", "sklearn"),
    "wine_2v": ("wine: columns 0-6 / 7-12 (two views)", "sklearn"),
    "cancer_mw": ("breast cancer: mean / worst features, the standard errors dropped", "sklearn"),
    "mf_fou_kar": ("mfeat Fourier + Karhunen-Loeve, 500", "mfeat"),
    "mf_pix_zer": ("mfeat pixels + Zernike, 500", "mfeat"),
    "mf_fac_mor": ("mfeat profile correlations + morphology, 500", "mfeat"),
    "mf_zer_mor": ("mfeat Zernike + morphology, 500", "mfeat"),
    "mf_fou_zer_mor": ("mfeat Fourier + Zernike + morphology, 500", "mfeat"),
    "syn13": ((300, 4, [(10, 0.7, "info"), (10, 0.6, "info"), (20, 0, "noise"), (20, 0, "noise")], 13, None, None),
              "synthetic"),
    "syn14": ((420, 6, [(8, 0.6, "info"), (8, 0.6, "info"), (8, 0.6, "info")], 14, None, 4), "synthetic"),
    "syn15": ((360, 3, [(6, 1.0, "info"), (30, 0, "noise"), (30, 0, "noise"), (10, 0, "noise")], 15,
               [0.6, 0.3, 0.1], None), "synthetic"),
    "syn16": ((500, 10, [(10, 1.0, "pairs"), (10, 1.0, "pairs2"), (15, 0.4, "info"), (20, 0, "noise")], 16, None,
               None), "synthetic"),
    "syn17": ((300, 5, [(2, 1.0, "ring"), (8, 0.5, "info"), (15, 0, "noise")], 17, None, None), "synthetic"),
    # Declared after the rules above were measured on the 13 sets above, before any sweep on
    # these: the check of the shipped rule on sets it was not chosen on.
    "mf_fou_pix": ("mfeat Fourier + pixels, 500", "holdout"),
    "mf_kar_mor": ("mfeat Karhunen-Loeve + morphology, 500", "holdout"),
    "mf_fac_zer": ("mfeat profile correlations + Zernike, 500", "holdout"),
    "digits_tb": ("digits: 500 (50 per class, seed 1), image rows 0-3 / 4-7", "holdout"),
    "cancer_ms": ("breast cancer: mean / standard-error features", "holdout"),
    "syn18": ((400, 5, [(12, 0.6, "info"), (6, 0.9, "info"), (40, 0, "noise")], 18, [0.35, 0.25, 0.2, 0.1, 0.1],
               None), "holdout"),
    "syn19": ((360, 6, [(10, 1.0, "pairs"), (10, 1.0, "pairs2"), (25, 0, "noise")], 19, None, 5), "holdout"),
    "syn20": ((300, 3, [(2, 1.0, "ring"), (2, 1.0, "ring"), (10, 0, "noise")], 20, None, None), "holdout"),
    "syn21": ((480, 8, [(15, 0.5, "info"), (15, 0.5, "info"), (15, 0.5, "info"), (15, 0, "noise")], 21, None, None),
              "holdout"),
    "yale": ("YALE (seen by rounds 1-3; alpha = 1 loses 6 points there)", "seen"),
    "politicsuk": ("politicsuk (seen by rounds 1-3; --politicsuk PATH)", "seen"),
}
SKLEARN = {"digits_lr": ("load_digits", [[r * 8 + c for r in range(8) for c in range(4)],
                                         [r * 8 + c for r in range(8) for c in range(4, 8)]]),
           "wine_2v": ("load_wine", [range(0, 7), range(7, 13)]),
           "cancer_mw": ("load_breast_cancer", [range(0, 10), range(20, 30)]),
           "digits_tb": ("load_digits", [range(0, 32), range(32, 64)]),
           "cancer_ms": ("load_breast_cancer", [range(0, 10), range(10, 20)])}
MFEAT = {"mf_fou_kar": ("fou", "kar"), "mf_pix_zer": ("pix", "zer"), "mf_fac_mor": ("fac", "mor"),
         "mf_zer_mor": ("zer", "mor"), "mf_fou_zer_mor": ("fou", "zer", "mor"), "mf_fou_pix": ("fou", "pix"),
         "mf_kar_mor": ("kar", "mor"), "mf_fac_zer": ("fac", "zer")}


def _per_class(y, per, seed=0):
    rng = np.random.default_rng(seed)
    return np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), per, replace=False) for c in np.unique(y)]))


def load(name, politicsuk=None):
    """Raw kernels (m, n, n) and labels of a set of :data:`SETS`."""
    from sklearn.preprocessing import StandardScaler

    if name == "yale":
        from lswmkc_dask.datasets import load_yale

        return load_yale()
    if name == "politicsuk":
        from lswmkc_dask.io import load_kernels

        if not politicsuk:
            raise SystemExit("selection_round4: politicsuk needs --politicsuk PATH (politicsuk_3view_Kmatrix.mat)")
        return load_kernels(politicsuk)
    if name in SKLEARN:
        from sklearn import datasets

        loader, columns = SKLEARN[name]
        bunch = getattr(datasets, loader)()
        x, y = bunch.data, np.asarray(bunch.target)
        if name.startswith("digits"):
            keep = _per_class(y, 50, seed=int(name == "digits_tb"))
            x, y = x[keep], y[keep]
        views = [StandardScaler().fit_transform(x[:, list(c)]) for c in columns]
    elif name in MFEAT:
        from lswmkc_dask.datasets import load_handwritten

        raw, y = load_handwritten(MFEAT[name])
        keep = _per_class(np.asarray(y), 50)
        views, y = [StandardScaler().fit_transform(v[keep]) for v in raw], np.asarray(y)[keep]
    else:
        views, y = synthetic_views(*SETS[name][0])
    return kernels_from_features(views, "gaussian"), np.asarray(y)


def run_set(name, cache, politicsuk=None):
    """Sweep one set (cached) and compute every label-free score per alpha; the raw record."""

    from lswmkc_dask.grid.sweep import sweep

    kernels, y = load(name, politicsuk)
    k = int(np.unique(y).size)
    t = time.perf_counter()
    out = cache / name
    summary = sweep(kernels, out, labels=y, alphas=ALPHAS, n_clusters=k, random_state=0, progress=False)
    sweep_s = time.perf_counter() - t
    rows = sorted(summary["rows"], key=lambda r: r["alpha"])
    prep = preprocess_kernels(kernels)
    seeded = []
    per_alpha = []
    for r in rows:
        run = out / "runs" / f"alpha={r['alpha']:g}_c=5"
        z, w = run_arrays(run)
        emb = factor_embeddings(w, [k])[k]
        seeded.append(np.stack([kmeans_best_of(emb, k, 10, s)[0] for s in SEEDS]))
        per_alpha.append({"alpha": r["alpha"], "ACC_honest": r["ACC_honest"],
                          "silhouette": r["silhouette_avg_kernel"], "kkm": r["kkm_objective_avg_kernel"],
                          "alignment": r["alignment_avg_kernel"], "autosc_gap": relative_eigengap(z, k),
                          "samples": read_silhouettes(run)[0].tolist()})
    parts = np.concatenate(seeded)
    seed_sil = finish_partition_scores([partition_scores_block(prep, 0, parts)], parts)["silhouette_avg_kernel"]
    for i, rec in enumerate(per_alpha):
        rec["silhouette_seeds"] = seed_sil[i * len(SEEDS):(i + 1) * len(SEEDS)].tolist()
    return {"set": name, "what": SETS[name][0] if isinstance(SETS[name][0], str) else "synthetic: " + repr(SETS[name][0]),
            "group": SETS[name][1], "n": int(y.size), "k": k, "m": int(len(kernels)), "sweep_seconds": sweep_s,
            "selected_by_package": {key: summary["selected"].get(key) for key in
                                    ("alpha", "criterion", "score", "default")}, "points": per_alpha}


# ----------------------------------------------------------------------------- the picks

def _argmax(points, key):
    """Index of the largest ``key`` (ties: the smaller alpha, as the sweep)."""
    return max(range(len(points)), key=lambda i: (points[i][key], -points[i]["alpha"]))


def _sil_rule(points, d, se_times=1.0):
    b = _argmax(points, "silhouette")
    s = np.array([p["samples"] for p in points])
    dec = default_decision(s, b, d)
    return b if b != d and dec["win"] > se_times * dec["spread"] else d


def picks(record):
    """Every criterion's and rule's pick (a row index), or ("mean", None) for the random alpha."""
    pts = record["points"]
    d = next(i for i, p in enumerate(pts) if p["alpha"] == DEFAULT_ALPHA)
    s = np.array([p["samples"] for p in pts])
    b = _argmax(pts, "silhouette")
    g = _argmax(pts, "autosc_gap")
    out = {
        "keep the default (alpha = 1)": d,
        "silhouette_avg_kernel, argmax (today's pick)": b,
        "kkm_objective_avg_kernel, argmax": _argmax(pts, "kkm"),
        "alignment_avg_kernel, argmax": _argmax(pts, "alignment"),
        "AutoSC relative eigen-gap of Z, argmax": g,
        "rank mean of silhouette and AutoSC gap, argmax": _rank_mean(pts, ("silhouette", "autosc_gap")),
        "fixed alpha = 1024": len(pts) - 1,
        "random alpha (grid mean)": None,
        "RULE silhouette: default unless win > 1 SE": _sil_rule(pts, d, 1.0),
        "RULE silhouette: default unless win > 2 SE": _sil_rule(pts, d, 2.0),
    }
    one_se = out["RULE silhouette: default unless win > 1 SE"]
    out["RULE 1 SE and AutoSC gap at the pick > at the default"] = (
        one_se if one_se == d or pts[one_se]["autosc_gap"] > pts[d]["autosc_gap"] else d)
    dec_g = default_decision(s, g, d)
    out[SHIPPED] = g if g != d and dec_g["win"] > dec_g["spread"] else d
    votes_agree = pts[b]["kkm"] > pts[d]["kkm"] and pts[b]["alignment"] > pts[d]["alignment"]
    out["RULE 1 SE and both votes prefer the pick to the default"] = one_se if votes_agree else d
    seeds = np.array([p["silhouette_seeds"] for p in pts])
    w = seeds[b] - seeds[d]
    out["RULE silhouette: default unless win over 5 k-means seeds > their std"] = (
        b if b != d and w.mean() > w.std(ddof=1) else d)
    ties = near_ties(s, b)["tied"]
    nearest = min((i for i in range(len(pts)) if ties[i]), key=lambda i: abs(np.log2(pts[i]["alpha"])))
    out["RULE 1 SE, then the near-tie of the best nearest the default"] = nearest if one_se != d else d
    return out


def _rank_mean(points, keys):
    ranks = np.zeros(len(points))
    for key in keys:
        v = np.array([p[key] for p in points])
        ranks += np.argsort(np.argsort(-v, kind="stable"), kind="stable")
    return int(min(range(len(points)), key=lambda i: (ranks[i], points[i]["alpha"])))


def evaluate(records):
    """Per criterion: regrets and losses against the default, per set; the totals."""
    table = {}
    for rec in records:
        pts = rec["points"]
        acc = np.array([p["ACC_honest"] for p in pts])
        d = next(i for i, p in enumerate(pts) if p["alpha"] == DEFAULT_ALPHA)
        for crit, i in picks(rec).items():
            got = float(acc.mean()) if i is None else float(acc[i])
            table.setdefault(crit, {})[rec["set"]] = {
                "alpha": None if i is None else pts[i]["alpha"], "regret": 100 * (acc.max() - got),
                "loss_vs_default": 100 * (acc[d] - got)}
    return table


def _totals(per_set, names):
    reg = [per_set[s]["regret"] for s in names]
    loss = [per_set[s]["loss_vs_default"] for s in names]
    return (float(np.mean(reg)), sum(r <= 2.0 for r in reg), float(np.mean(loss)), float(max(loss)),
            sum(v > 2.0 for v in loss))


def print_tables(table, records):
    groups = {"13 new sets (rules declared before their run)":
              [r["set"] for r in records if r["group"] not in ("seen", "holdout")],
              "holdout sets (declared after the rules were measured)": [r["set"] for r in records
                                                                        if r["group"] == "holdout"],
              "every set (with YALE and politicsuk, seen before)": [r["set"] for r in records]}
    every = [r["set"] for r in records]
    for title, names in groups.items():
        if not names:
            continue
        print(f"\n{title}: {len(names)}: {', '.join(names)}")
        print("\n| criterion or rule | mean regret | within 2 | mean loss vs default | worst loss vs default | "
              "sets > 2 worse than default |")
        print("|---|---|---|---|---|---|")
        for crit, per_set in table.items():
            m, w, ml, wl, bad = _totals(per_set, names)
            print(f"| {crit} | {m:.2f} | {w}/{len(names)} | {ml:+.2f} | {wl:+.2f} | {bad} |")
    print("\nPer set: the pick's alpha and its regret (points); loss vs the default in brackets")
    print("| criterion or rule | " + " | ".join(every) + " |")
    print("|---|" + "---|" * len(every))
    for crit, per_set in table.items():
        cells = []
        for s in every:
            e = per_set[s]
            a = "-" if e["alpha"] is None else f"{e['alpha']:g}"
            cells.append(f"{a}: {e['regret']:.1f} ({e['loss_vs_default']:+.1f})")
        print(f"| {crit} | " + " | ".join(cells) + " |")
    print("\n| set | n | k | m | grid ACC min-max | best alpha | default ACC | win (1 SE rule) | spread |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rec in records:
        pts = rec["points"]
        acc = np.array([p["ACC_honest"] for p in pts])
        s = np.array([p["samples"] for p in pts])
        d = next(i for i, p in enumerate(pts) if p["alpha"] == DEFAULT_ALPHA)
        dec = default_decision(s, _argmax(pts, "silhouette"), d)
        print(f"| {rec['set']} | {rec['n']} | {rec['k']} | {rec['m']} | {acc.min():.3f}-{acc.max():.3f} | "
              f"{pts[int(np.argmax(acc))]['alpha']:g} | {acc[d]:.3f} | {dec['win']:.4f} | {dec['spread']:.4f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", choices=list(SETS), help="default: every set (politicsuk with --politicsuk)")
    ap.add_argument("--politicsuk", help="path of politicsuk_3view_Kmatrix.mat (MATLAB v7.3)")
    ap.add_argument("--cache", default="/tmp/selection_round4", help="the sweeps are cached here")
    ap.add_argument("--output", default=str(ROOT / "benchmarks" / "output" / "selection_round4"),
                    help="raw per-set JSON")
    args = ap.parse_args(argv)
    names = args.sets or [s for s in SETS if s != "politicsuk" or args.politicsuk]
    cache, output = Path(args.cache), Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()} | {platform.python_version()} | numpy {np.__version__}", file=sys.stderr)
    records = []
    started = time.perf_counter()
    for name in names:
        t = time.perf_counter()
        rec = run_set(name, cache, args.politicsuk)
        rec["seconds"] = time.perf_counter() - t
        (output / f"{name}.json").write_text(json.dumps(rec) + "\n")
        print(f"  {name}: n={rec['n']} k={rec['k']} {rec['seconds']:.1f} s", file=sys.stderr, flush=True)
        records.append(rec)
    table = evaluate(records)
    agree = [r["set"] for r in records if r["selected_by_package"]["alpha"] == table[SHIPPED][r["set"]]["alpha"]]
    print(f"the package's summary (weigh_default) picks the shipped rule's alpha on {len(agree)} of {len(records)} "
          f"sets{'' if len(agree) == len(records) else ': not on ' + ', '.join(r['set'] for r in records if r['set'] not in agree)}")
    (output / "table.json").write_text(json.dumps(table, indent=1) + "\n")
    print_tables(table, records)
    print(f"\ntotal {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
