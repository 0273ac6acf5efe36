"""Parameter validation, once per entry point, before any I/O.

Each entry point (:class:`lswmkc_dask.LSWMKC` ``fit``, :func:`lswmkc_dask.sweep`,
:func:`lswmkc_dask.grid.compare.compare`, the baselines of :mod:`lswmkc_dask.grid.baselines`)
calls :func:`validate` twice: on entry, before anything is read, with its parameters
(the parameter table's constraints, :func:`lswmkc_dask._params.parameter_constraints`,
checked here, in scikit-learn's words, by :func:`check_params`; the
iteration bounds; gamma; the alpha range), and once the store is open, with the number
of samples n (``n_clusters`` and ``n_neighbors`` against n). An entry point that goes on
into another one (``compare`` into ``sweep``, ``lswmkc fit`` into ``LSWMKC.fit``) calls
it inside :func:`validated`, which skips the inner validation: its parameters were
checked by the caller (scikit-learn's ``prefer_skip_nested_validation``).

Errors are :class:`~lswmkc_dask.errors.ParameterError` (a ``ValueError``) naming the
parameter, which the command line renders as its flag.
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
from .errors import Param, ParameterError

__all__ = ["ENTRY_POINTS", "InvalidParameter", "check_hyperparameters", "check_iterations", "check_params",
           "validate", "validated"]

#: The entry points :func:`validate` knows: the parameter table's Python entry points
#: (:data:`lswmkc_dask._params.ENTRY_POINTS`) and the baselines.
ENTRY_POINTS = ("LSWMKC", "sweep", "compare", "baselines")
#: The parameters the baselines share with LSWMKC (their rows of the parameter table);
#: ``max_iter`` and ``tol`` are MKKM's, under the same constraints.
BASELINE_PARAMS = ("n_clusters", "max_iter", "tol", "n_init", "random_state", "degenerate_kernels", "eig_threads",
                   "block_rows", "client", "n_workers", "processes")

#: True inside :func:`validated`: the entry point called there was validated by its caller.
_NESTED: contextvars.ContextVar[bool] = contextvars.ContextVar("lswmkc_validated", default=False)


class InvalidParameter(ParameterError, TypeError):
    """A parameter of the wrong type or out of its range, in scikit-learn's words ("The
    'n_init' parameter of LSWMKC must be an int in the range [1, 10000]. Got 0
    instead."): a ``ValueError`` and ``TypeError``, as scikit-learn's
    ``InvalidParameterError``, carrying the parameter's name (``.parameter``) so that the
    command line names its flag.
    """


def check_iterations(max_iter: int, min_iter: int, default_allowed: bool = True) -> None:
    """Refuse a ``min_iter`` above ``max_iter``: the stop rule would never be tested.

    Parameters
    ----------
    max_iter : int
        The iteration cap.
    min_iter : int
        Iterations before the stop rule is first tested. The default :data:`MIN_ITER`
        (20) is accepted with any ``max_iter`` (a fit of fewer iterations simply stops
        at ``max_iter``); any other value must be at most ``max_iter``.
    default_allowed : bool
        False: the default is held to the rule too (``lswmkc --min-iter 20`` given
        explicitly).

    Raises
    ------
    ParameterError
        (a ValueError) ``min_iter > max_iter`` for a ``min_iter`` other than the
        default; the message names both.
    """
    if min_iter > max_iter and not (default_allowed and min_iter == MIN_ITER):
        raise ParameterError(
            "{} is above {}: a fit stops after {} iterations at most, before the stop rule (first tested after "
            "{} iterations) could stop it; lower {} or raise {}", Param("min_iter", min_iter),
            Param("max_iter", max_iter), max_iter, min_iter, Param("min_iter"), Param("max_iter"),
        )


def check_params(caller: str, params: Mapping[str, Any], entry: str | None = None) -> None:
    """Validate the parameters of an entry point against the parameter table, before any I/O.

    Each of ``params`` that the table gives a constraint for ``caller``
    (:func:`lswmkc_dask._params.parameter_constraints`) is checked against it, in the
    table's order; others are ignored.

    Parameters
    ----------
    caller : str
        The entry point, named in the message: ``"LSWMKC"``, ``"FitOptions"``,
        ``"sweep"``, ``"compare"`` or ``"baselines"`` (and its rows of the table, unless
        ``entry`` is given).
    params : mapping of str to object
        Its arguments (e.g. ``locals()`` on entry).
    entry : str, optional
        The row set of the table, where it differs from ``caller`` (a subclass of
        :class:`~lswmkc_dask.LSWMKC` is checked as ``"LSWMKC"``, named as itself).

    Raises
    ------
    InvalidParameter
        (a ``ValueError`` and ``TypeError``) the first parameter of the wrong type or
        out of range, named in the message (and as its flag on the command line).
    """
    for name, constraint in _constraints(entry or caller).items():
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
    """Validate LSWMKC hyper-parameters (a value or a grid of values each) against the
    number of samples.

    Parameters
    ----------
    n_samples : int
    n_clusters : int or sequence of int, optional
        Each must satisfy ``2 <= n_clusters < n``: with one cluster per sample (``k = n``)
        k-means has nothing to group and every metric is meaningless.
    alpha : float or sequence of float, optional
        Each must satisfy ``0 <= alpha <= ALPHA_MAX`` (1e300,
        :data:`lswmkc_dask.core.ALPHA_MAX`: beyond about 9e307 the update of Z
        overflows float64).
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


def _constraints(entry: str) -> dict[str, tuple]:
    """The parameter table's constraints of ``entry`` (the baselines: their rows of LSWMKC's)."""
    if entry == "baselines":
        return {k: v for k, v in parameter_constraints("LSWMKC").items() if k in BASELINE_PARAMS}
    return parameter_constraints(entry)


def validate(entry: str, params: Mapping[str, Any], n_samples: int | None = None, caller: str | None = None) -> None:
    """Validate the parameters of an entry point (docs/parameters.md), naming the first bad one.

    Without ``n_samples`` (on entry, before any I/O): the parameter table's constraints
    of ``entry`` (type and range of each parameter it takes); ``min_iter`` against
    ``max_iter`` (:func:`check_iterations`); ``gamma`` or each of ``gammas``
    (:func:`lswmkc_dask.core.check_gamma`); ``alpha`` or each of ``alphas`` in
    ``[0, ALPHA_MAX]``. With ``n_samples`` (the store open, before any work):
    ``n_clusters`` and ``n_neighbors``, a value or a grid, against n
    (:func:`check_hyperparameters`). Inside :func:`validated` nothing is checked: the
    caller, another entry point, did.

    Parameters
    ----------
    entry : {"LSWMKC", "sweep", "compare", "baselines"}
        The entry point (:data:`ENTRY_POINTS`): which rows of the table apply.
    params : mapping of str to object
        Its arguments (e.g. ``locals()`` on entry); names it does not take are ignored.
    n_samples : int, optional
        n, once known: selects the second check.
    caller : str, optional
        The name in the messages (default ``entry``; a baseline's function).

    Raises
    ------
    InvalidParameter
        (a ``ValueError`` and ``TypeError``) a parameter of the wrong type or out of
        the table's range, named in the message.
    ParameterError
        (a ``ValueError``) ``min_iter`` above ``max_iter``, gamma or alpha out of
        range, ``n_clusters`` or ``n_neighbors`` out of range for n.
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
    """Inside, :func:`validate` checks nothing: the entry point called there was
    validated by its caller (``compare`` calling ``sweep``, ``lswmkc fit`` calling
    ``LSWMKC.fit``), as scikit-learn's ``prefer_skip_nested_validation`` skips the
    validation of nested estimators.

    Yields
    ------
    None
    """
    token = _NESTED.set(True)
    try:
        yield
    finally:
        _NESTED.reset(token)
