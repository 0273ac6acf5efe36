"""Parameter validation, once per entry point, before any I/O.

Each entry point (``LSWMKC.fit``, ``sweep``, ``compare``, the baselines) calls
:func:`validate` on entry and again with n once the store is open; one called by another
inside :func:`validated` checks nothing again. Errors are
:class:`~lswmkc_dask.errors.ParameterError` naming the parameter (on the command line, its flag).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ._constraints import check, describe
from ._params import MIN_ITER, parameter_constraints
from .core.equations import ALPHA_MAX, ALPHA_RANGE_WHY, check_gamma
from .errors import InvalidParameter, Param, ParameterError

#: The entry points :func:`validate` knows: the parameter table's and the baselines.
ENTRY_POINTS = ("LSWMKC", "sweep", "compare", "baselines")
#: The parameters (rows of LSWMKC) the baselines take; ``max_iter`` and ``tol`` are MKKM's.
BASELINE_PARAMS = ("n_clusters", "max_iter", "tol", "n_init", "random_state", "degenerate_kernels", "eig_threads",
                   "block_rows", "client", "n_workers", "processes")

#: True inside :func:`validated`: the entry point called there was validated by its caller.
_NESTED: contextvars.ContextVar[bool] = contextvars.ContextVar("lswmkc_validated", default=False)


def check_iterations(max_iter: int, min_iter: int, default_allowed: bool = True) -> None:
    """Refuse a ``min_iter`` above ``max_iter``: the stop rule would never be tested.

    Parameters
    ----------
    max_iter : int
        The iteration cap.
    min_iter : int
        Iterations before the stop rule is first tested; the default :data:`MIN_ITER`
        is accepted with any ``max_iter``.
    default_allowed : bool
        False: the default is held to the rule too (``--min-iter 20`` given).

    Raises
    ------
    ParameterError
        ``min_iter > max_iter`` (a ValueError naming both).
    """
    if min_iter > max_iter and not (default_allowed and min_iter == MIN_ITER):
        raise ParameterError(
            "{} is above {}: a fit stops after {} iterations at most, before the stop rule (first tested after "
            "{} iterations) could stop it; lower {} or raise {}", Param("min_iter", min_iter),
            Param("max_iter", max_iter), max_iter, min_iter, Param("min_iter"), Param("max_iter"),
        )


def check_params(caller: str, params: Mapping[str, Any], entry: str | None = None) -> None:
    """Check the parameters of an entry point against the parameter table's constraints, in its order.

    Parameters
    ----------
    caller : str
        The entry point named in the message (``"LSWMKC"``, ``"sweep"``, ``"compare"``,
        ``"baselines"``, a subclass or a baseline's function).
    params : mapping of str to object
        Its arguments; names without a constraint are ignored.
    entry : str, optional
        The table's row set, where it differs from ``caller``.

    Raises
    ------
    InvalidParameter
        (a ``ValueError`` and ``TypeError``) the first parameter of the wrong type or
        out of range, named in the message.
    """
    entry = entry or caller
    for name, constraint in parameter_constraints("LSWMKC" if entry == "baselines" else entry).items():
        if entry == "baselines" and name not in BASELINE_PARAMS:
            continue
        if name in params and not check(constraint, params[name]):
            raise InvalidParameter("{} must be {}. Got {!r} instead.",
                                   Param(name, python=f"The {name!r} parameter of {caller}"), describe(constraint),
                                   params[name])


def _each(value: Any) -> tuple:
    """A value or a grid of values as a tuple (None: empty)."""
    if value is None:
        return ()
    if isinstance(value, np.ndarray):
        return tuple(value.ravel().tolist())
    return tuple(value) if isinstance(value, (list, tuple, range)) else (value,)


def _check_alphas(alpha: Any) -> None:
    """Each alpha (a value or a grid) in ``[0, ALPHA_MAX]``: n plays no part."""
    for a in _each(alpha):
        if not isinstance(a, numbers.Real) or not math.isfinite(a) or not 0 <= float(a) <= ALPHA_MAX:
            raise ParameterError("{} must be a number in [0, {:g}], got {!r}{}", Param("alpha"), ALPHA_MAX, a,
                                 ALPHA_RANGE_WHY if isinstance(a, numbers.Real) and float(a) > ALPHA_MAX else "")


def check_hyperparameters(
    n_samples: int,
    n_clusters: int | Sequence[int] | None = None,
    alpha: float | Sequence[float] | None = None,
    n_neighbors: int | Sequence[int] | None = None,
) -> None:
    """Check LSWMKC hyper-parameters (each a value or a grid) against the number of samples.

    Parameters
    ----------
    n_samples : int
    n_clusters : int or sequence of int, optional
        Each must satisfy ``2 <= n_clusters < n`` (k = n leaves k-means nothing to group).
    alpha : float or sequence of float, optional
        Each must satisfy ``0 <= alpha <= ALPHA_MAX`` (:data:`lswmkc_dask.core.equations.ALPHA_MAX`).
    n_neighbors : int or sequence of int, optional
        c, each must satisfy ``1 <= c < n - 1``.

    Raises
    ------
    ValueError
        With the offending value and the allowed range.
    """
    for k in _each(n_clusters):  # each value of a grid in turn
        if not isinstance(k, numbers.Integral) or not 2 <= int(k) < n_samples:
            raise ParameterError(
                "{} must be an integer in [2, n_samples - 1 = {}], got {!r}{}", Param("n_clusters"), n_samples - 1,
                k, " (one cluster per sample leaves k-means nothing to group)" if k == n_samples else "",
            )
    _check_alphas(alpha)
    for c in _each(n_neighbors):
        if not isinstance(c, numbers.Integral) or not 1 <= int(c) < n_samples - 1:
            raise ParameterError(
                "{} must be an integer in [1, n_samples - 2 = {}], got {!r}", Param("n_neighbors"), n_samples - 2, c
            )


def validate(entry: str, params: Mapping[str, Any], n_samples: int | None = None, caller: str | None = None) -> None:
    """Validate the parameters of an entry point (docs/parameters.md), naming the first bad one.

    Without ``n_samples`` (on entry): the table's constraints (:func:`check_params`),
    ``min_iter`` against ``max_iter``, ``gamma``/``gammas``
    (:func:`lswmkc_dask.core.check_gamma`) and ``alpha``/``alphas``. With ``n_samples``:
    ``n_clusters`` and ``n_neighbors`` against n (:func:`check_hyperparameters`). Inside
    :func:`validated`, nothing.

    Parameters
    ----------
    entry : {"LSWMKC", "sweep", "compare", "baselines"}
        Which rows of the table apply.
    params : mapping of str to object
        Its arguments; names it does not take are ignored.
    n_samples : int, optional
        n, once known: selects the second check.
    caller : str, optional
        The name in the messages (default ``entry``).

    Raises
    ------
    InvalidParameter
        A parameter of the wrong type or out of the table's range.
    ParameterError
        (a ``ValueError``) ``min_iter`` above ``max_iter``; gamma, alpha, ``n_clusters``
        or ``n_neighbors`` out of range.
    ValueError
        ``entry`` is not one of :data:`ENTRY_POINTS`.
    """
    if entry not in ENTRY_POINTS:
        raise ValueError(f"entry must be one of {ENTRY_POINTS}, got {entry!r}")
    if _NESTED.get():
        return
    if n_samples is not None:
        check_hyperparameters(n_samples, params.get("n_clusters"), None, params.get("n_neighbors"))
        return
    check_params(caller or entry, params, entry)
    if "min_iter" in params:
        check_iterations(params["max_iter"], params["min_iter"])
    for g in (*_each(params.get("gamma")), *_each(params.get("gammas"))):
        check_gamma(g)
    _check_alphas(params.get("alpha"))
    _check_alphas(params.get("alphas"))


@contextlib.contextmanager
def validated() -> Iterator[None]:
    """Inside, :func:`validate` checks nothing: the entry point called there was validated
    by its caller (scikit-learn's ``prefer_skip_nested_validation``).

    Yields
    ------
    None
    """
    token = _NESTED.set(True)
    try:
        yield
    finally:
        _NESTED.reset(token)
