"""``lswmkc predict``: the clusters of new samples from a fitted model
(:meth:`lswmkc_dask.LSWMKC.predict`), written as ``lswmkc fit`` writes ``labels.csv``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .._params import add_arguments
from ..errors import CLIError
from ._base import add_output
from ._inputs import add_feature_reading, read_feature_views, view_names, where_of

#: The members of a KERNELS file: the cross-kernels k_p(x, X_train), shape (m, n_new, n_train) ...
CROSS_KERNELS = "kernels"
#: ... and the new samples' diagonals k_p(x, x), shape (m, n_new).
DIAGONALS = "diagonals"


def add_predict(sub: Any) -> None:
    """Add ``lswmkc predict`` to the sub-parsers ``sub``."""
    p = sub.add_parser(
        "predict", help="label new samples with a fitted model",
        usage="lswmkc predict [-h] MODEL (--features FILE [FILE ...] | KERNELS) --output LABELS.csv [options]",
        description="Label samples the model was not fitted on (LSWMKC.predict: the training statistics, kernel "
                    "weights and embedding of the fit) and write them as `lswmkc fit` writes labels.csv "
                    "(sample,predicted_label). A model fitted on features takes the new samples' feature files "
                    f"(--features); one fitted on precomputed kernels takes KERNELS, an .npz holding "
                    f"'{CROSS_KERNELS}', the raw cross-kernels k_p(x, X_train) of every input kernel in the order "
                    f"of the fit, shape (m, n_new, n_train), and '{DIAGONALS}', k_p(x, x), shape (m, n_new) "
                    f"(numpy.savez(path, {CROSS_KERNELS}=K, {DIAGONALS}=d); '{DIAGONALS}' may be left out for one "
                    "kernel with gamma 'auto'). A model fitted on a kernel store (lswmkc prepare) takes KERNELS too, "
                    "the raw cross-kernels of the kernels the store was prepared from (a store prepared by an earlier "
                    "version keeps no training statistics: prepare it again).",
    )
    p.add_argument("model", metavar="MODEL",
                   help="the fitted model: a model file (LSWMKC.save) or a fit directory (lswmkc fit --output DIR: "
                        "DIR/model.safetensors)")
    p.add_argument("kernels", nargs="?", metavar="KERNELS",
                   help=f"an .npz of the new samples' cross-kernels ('{CROSS_KERNELS}', (m, n_new, n_train)) and "
                        f"diagonals ('{DIAGONALS}', (m, n_new)), for a model fitted on precomputed kernels")
    p.add_argument("--features", nargs="+", metavar="FILE",
                   help="one feature file per view of the new samples, in the order of the fit and read as `lswmkc "
                        "fit --features` reads them (the same columns; a label column is left out), for a model "
                        "fitted on features; a file named as another fitted view is refused")
    add_feature_reading(p, "predict")
    add_arguments(p.add_argument_group("where to run (default: in this process)"), "predict", section="where")
    add_output(p, "LABELS.csv", "the labels to write (sample,predicted_label, as labels.csv of `lswmkc fit`), "
                                "under a temporary name renamed when complete",
               "replace an existing --output file (never a directory, a link or an input)", required=True)


def read_cross_kernels(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """The cross-kernels and diagonals of a KERNELS file (:class:`lswmkc_dask.io.npz.NpzArchive`:
    a regular file only, bounded expansion, no pickle).

    Parameters
    ----------
    path : str or Path
        An ``.npz`` with :data:`CROSS_KERNELS` (m, n_new, n_train) and optionally
        :data:`DIAGONALS` (m, n_new), real numbers.

    Returns
    -------
    kernels : ndarray of shape (m, n_new, n_train)
    diagonals : ndarray of shape (m, n_new) or None

    Raises
    ------
    FileNotFoundError
        No file.
    ArrayFileError
        Not a regular file, not an ``.npz``, no :data:`CROSS_KERNELS`, or a member of
        another dtype or shape (a ``ValueError`` naming the file and the member).
    """
    from ..io.npz import ArrayFileError, NpzArchive

    class KernelsFileError(ArrayFileError):
        remedy = f"save it with numpy.savez(path, {CROSS_KERNELS}=K, {DIAGONALS}=d)"

    with NpzArchive(path, KernelsFileError) as f:
        if CROSS_KERNELS not in f:
            raise KernelsFileError(f"{path} has no array {CROSS_KERNELS!r} (arrays: {', '.join(f.names) or 'none'}); "
                                   f"{KernelsFileError.remedy}")
        kernels = f.read(CROSS_KERNELS, "fi", (None, None, None))
        diagonals = f.read(DIAGONALS, "fi", (kernels.shape[0], kernels.shape[1])) if DIAGONALS in f else None
    return kernels, diagonals


def run_predict(args: argparse.Namespace) -> int:
    """``lswmkc predict``: the labels of new samples (:meth:`lswmkc_dask.LSWMKC.predict`) written to --output; exit 0."""
    from pathlib import Path

    from ..estimator import LSWMKC
    from ..io.output import atomic_path, check_output
    from ..report.record import labels_csv

    if bool(args.features) == bool(args.kernels):
        raise CLIError("give the new samples once: --features FILE ... (a model fitted on features) or KERNELS "
                       "(an .npz of cross-kernels, for a model fitted on precomputed kernels)")
    inputs = [args.model, *(args.features or [args.kernels])]
    check_output(args.output, overwrite=args.overwrite, inputs=inputs)  # before any work
    model = LSWMKC.load(args.model)
    if args.scheduler or args.scheduler_file:  # the blocks go to that cluster's workers (LSWMKC.predict's client)
        model.client = where_of(args)
    on_features = getattr(model, "train_features_", None) is not None
    if args.features and not on_features and getattr(model, "kernel_col_means_", None) is not None:
        raise CLIError(f"--features: the model {args.model} was fitted on precomputed kernels, not features: give "
                       "KERNELS, an .npz of the cross-kernels k_p(x, X_train) and diagonals k_p(x, x) (lswmkc "
                       "predict -h)")
    if args.kernels and on_features:
        raise CLIError(f"{args.kernels}: the model {args.model} was fitted on {model.kernel} kernels of feature "
                       "views: give the new samples' views as --features FILE ...")
    if args.features:
        views, _ = read_feature_views(args, args.features)
        labels = model.predict(views, view_names=view_names(args.features))  # each named as fit names it
    else:
        cross, diagonals = read_cross_kernels(args.kernels)
        labels = model.predict(cross, diagonals)
    with atomic_path(args.output, overwrite=args.overwrite, inputs=inputs) as tmp:
        Path(tmp).write_text(labels_csv(labels))
    print(f"wrote {args.output}: {len(labels)} labels of new samples, {model.n_clusters_} clusters")
    return 0
