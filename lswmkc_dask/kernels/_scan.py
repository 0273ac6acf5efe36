"""The first pass over base kernels: statistics gathered block by block, and the checks.

:class:`BlockScan` gathers, a row block at a time, what centring needs (column sums, the
raw diagonal) and what the checks need (NaN/Inf, ``max|K_ij|``, ``max|K_ij - K_ji|``,
identical kernels). The refusals (:func:`refuse_bad_kernels`, :func:`centred_diagonal_checks`) raise
:class:`~lswmkc_dask.errors.KernelInputError` for a kernel that cannot be centred and
normalised (docs/algorithm.md section 0), naming the kernel, the file and where;
:func:`lswmkc_dask.kernels.features.scan_kernels` runs them in that order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import KernelInputError

#: A kernel whose largest centred diagonal entry is at most this fraction of its largest
#: absolute entry is numerically constant ("degenerate"): centring leaves rounding error.
DEGENERATE_RTOL = 1e-8
#: Largest and smallest accepted ``max|K|`` of a base kernel: normalisation multiplies
#: diagonal entries, which overflows float64 beyond about 1e154 and underflows below
#: 1e-154 (such a kernel is refused with the advice to rescale it).
KERNEL_MAX_ABS = 1e150
KERNEL_MIN_ABS = 1e-140


class BlockScan:
    """What one pass over the raw kernels (m kernels of n samples) has seen so far.

    Parameters
    ----------
    m, n : int
        The number of kernels and of samples.

    Attributes
    ----------
    col_sums : ndarray of shape (m, n)
        Column sums of each raw kernel, added row after row (the reference's rounding).
    raw_diag : ndarray of shape (m, n)
        Diagonal of each raw kernel.
    max_abs : ndarray of shape (m,)
        Largest ``|K_ij|`` of each kernel (finite blocks).
    asym : ndarray of shape (m,)
        Largest ``|K_ij - K_ji|`` of each kernel; ``asym_at`` its (row, column), (0, 0) while 0.
    nan_count, inf_count : ndarray of shape (m,), int
        NaN and infinite entries of each kernel; ``first_bad`` the first one's (row, column), (0, 0) while none.
    same : list of (int, int)
        Pairs ``p < q`` of kernels identical so far.
    """

    def __init__(self, m: int, n: int) -> None:
        self.m = m
        self.n = n
        self.col_sums = np.zeros((m, n))
        self.raw_diag = np.zeros((m, n))
        self.max_abs = np.zeros(m)
        self.asym = np.zeros(m)
        self.asym_at = [(0, 0)] * m  # where the largest |K_ij - K_ji| is: 0 at first, on the diagonal
        self.nan_count = np.zeros(m, dtype=np.int64)
        self.inf_count = np.zeros(m, dtype=np.int64)
        self.first_bad = [(0, 0)] * m
        self.same = [(p, q) for p in range(m) for q in range(p + 1, m)]

    def add(self, start: int, rows: np.ndarray, transposed: Callable[[], np.ndarray] | None) -> None:
        """Take in rows ``start .. start + b`` of every kernel.

        Parameters
        ----------
        start : int
            First row of the block.
        rows : ndarray of shape (m, b, n)
            The raw rows.
        transposed : callable or None
            Returns the block's columns transposed, shape (m, b, n) (called for a finite
            block); None for kernels symmetric by construction.
        """
        stop = start + rows.shape[1]
        self.same = [(p, q) for p, q in self.same if np.array_equal(rows[p], rows[q])]
        with np.errstate(over="ignore", invalid="ignore"):  # huge entries are refused later, not warned about
            finite = np.isfinite(rows)
            if not finite.all():
                self._count_non_finite(start, rows, finite)
                return
            if transposed is not None:
                trows = transposed()
                if np.isfinite(trows).all():
                    self._add_asymmetry(start, rows, trows)
            self.max_abs = np.maximum(self.max_abs, np.abs(rows).max(axis=(1, 2)))
            for r in range(stop - start):  # column sums of the raw kernel, row after row as the
                self.col_sums += rows[:, r, :]  # reference sums (same rounding whatever the blocks)
            idx = np.arange(stop - start)
            self.raw_diag[:, start:stop] = rows[:, idx, start + idx]

    def _count_non_finite(self, start, rows, finite):
        for p in np.flatnonzero(~finite.all(axis=(1, 2))).tolist():
            if not (self.nan_count[p] or self.inf_count[p]):  # the kernel's first NaN/Inf
                r, c = np.argwhere(~finite[p])[0]
                self.first_bad[p] = (start + int(r), int(c))
            self.nan_count[p] += int(np.isnan(rows[p]).sum())
            self.inf_count[p] += int(np.isinf(rows[p]).sum())

    def _add_asymmetry(self, start, rows, trows):
        diff = np.abs(rows - trows).reshape(self.m, -1)
        flat = diff.argmax(axis=1)
        for p in range(self.m):
            if diff[p, flat[p]] > self.asym[p]:
                self.asym[p] = diff[p, flat[p]]
                self.asym_at[p] = (start + int(flat[p] // self.n), int(flat[p] % self.n))


def refuse_bad_kernels(scan: BlockScan, symmetry_tol: float, names: Sequence[str], of: str) -> None:
    """Refuse the first kernel with NaN or infinite entries, then with ``max|K|`` outside
    [KERNEL_MIN_ABS, KERNEL_MAX_ABS], then with ``max|K - K^T| > symmetry_tol x max|K|``.

    Parameters
    ----------
    scan : BlockScan
    symmetry_tol : float
        ``>= 0``; smaller asymmetry is rounding, symmetrised away.
    names : sequence of str
        Kernel names for the messages.
    of : str
        `` of FILE`` (or ``""``) after the name.

    Raises
    ------
    KernelInputError
        Which kernel and where: its NaN and infinite entries; that centring and
        normalising it would overflow or underflow float64 (rescale it); how far from
        symmetric.
    """
    # The first kernel with NaN or infinite entries.
    for p in range(scan.m):
        if scan.nan_count[p] or scan.inf_count[p]:
            r, c = scan.first_bad[p]  # set with the first NaN/Inf counted
            raise KernelInputError(
                f"{names[p]}{of} has {scan.nan_count[p]} NaN and {scan.inf_count[p]} infinite entries "
                f"(first at row {r}, column {c})"
            )
    # Then the first whose ``max|K|`` lies outside [KERNEL_MIN_ABS, KERNEL_MAX_ABS].
    for p in range(scan.m):
        if scan.max_abs[p] > KERNEL_MAX_ABS or 0 < scan.max_abs[p] < KERNEL_MIN_ABS:
            raise KernelInputError(
                f"{names[p]}{of} has entries up to {scan.max_abs[p]:.3g} in magnitude, outside "
                f"[{KERNEL_MIN_ABS:.0e}, {KERNEL_MAX_ABS:.0e}]: centring and normalising it (which sums entries "
                f"and multiplies diagonal entries) would {'overflow' if scan.max_abs[p] > 1 else 'underflow'} float64. "
                f"This is a problem of the input, not of a store: rescale the kernel, e.g. K / max|K| (any positive "
                f"factor gives the same normalised kernel)"
            )
    # Then the first with ``max|K - K^T| > symmetry_tol x max|K|``.
    for p in range(scan.m):
        scale = max(scan.max_abs[p], np.finfo(float).tiny)
        if scan.asym[p] > symmetry_tol * scale:
            r, c = scan.asym_at[p]  # set whenever asym[p] grows above 0 (symmetry_tol >= 0)
            asym = scan.asym[p]
            raise KernelInputError(
                f"{names[p]}{of} is far from symmetric: |K[{r},{c}] - K[{c},{r}]| = {asym:.3g}, "
                f"relative {asym / scale:.3g} > {symmetry_tol:g} (asymmetry up to that is rounding and is "
                f"symmetrised away); a kernel is symmetric: if this one should be, pass (K + K.T) / 2, but check "
                f"first that it is a kernel matrix and not, e.g., a k-nearest-neighbour graph"
            )


def centred_diagonal_checks(
    centred_diag: np.ndarray,
    diag: np.ndarray,
    scan: BlockScan,
    names: Sequence[str],
    of: str,
) -> dict[int, str]:
    """The numerically constant kernels; refuse a kernel whose centred diagonal cannot be
    normalised (``(H K H)_ii >= 0`` for a PSD kernel; normalisation divides by ``sqrt(Kc_ii Kc_jj)``).

    Parameters
    ----------
    centred_diag : ndarray of shape (m, n)
        Diagonal of each centred kernel, without the jitter.
    diag : ndarray of shape (m, n)
        The same with the jitter (``+ 1e-12``, as the reference).
    scan : BlockScan
        ``max_abs`` and ``raw_diag`` for the scale and the messages.
    names : sequence of str
    of : str

    Returns
    -------
    dict of int to str
        Kernel index -> why it is numerically constant (a largest centred diagonal
        entry at most :data:`DEGENERATE_RTOL` x max|K|).

    Raises
    ------
    KernelInputError
        In a kernel that is not constant, a negative centred diagonal entry (not
        positive semidefinite) or one not above ``1e-10 max|K|`` (which kernel, which
        sample).
    """
    degenerate = {}
    for p in range(scan.m):
        scale = max(scan.max_abs[p], np.finfo(float).tiny)
        if float(np.abs(centred_diag[p]).max()) <= DEGENERATE_RTOL * scale:
            degenerate[p] = _degenerate_message(p, centred_diag, diag, scale, names)
            continue
        _refuse_bad_diagonal(p, centred_diag, scan.raw_diag, 1e-10 * scale, names, of)
    return degenerate


def _degenerate_message(p, centred_diag, diag, scale, names):
    """Why kernel ``p`` is numerically constant (after centring only rounding error is left)."""
    spread = float(centred_diag[p].max())
    message = (
        f"{names[p]} is numerically constant: after centring its largest diagonal entry is "
        f"{spread:.3g}, <= {DEGENERATE_RTOL:g} x max|K| = {DEGENERATE_RTOL * scale:.3g}, so its entries "
        f"vary by rounding error only and it carries no information about the samples"
    )
    low = np.flatnonzero(diag[p] <= 0)
    if low.size:
        message += (
            f"; sample {int(low[0])} has diagonal {centred_diag[p, low[0]]:.3g} after centring, "
            f"which even the reference's +1e-12 I cannot make positive"
        )
    return message


def _refuse_bad_diagonal(p, centred_diag, raw_diag, tol, names, of):
    """Refuse kernel ``p`` if a centred diagonal entry is negative or not above ``tol``."""
    negative = np.flatnonzero(centred_diag[p] < -tol)
    if negative.size:
        # (H K H)_ii = ||phi(x_i) - mean||^2 >= 0 for any PSD kernel: not rounding.
        i = int(negative[np.argmin(centred_diag[p, negative])])
        raise KernelInputError(
            f"{names[p]}{of} is not positive semidefinite: after centring, sample {i} has diagonal entry "
            f"{centred_diag[p, i]:.3g} < 0 (raw {raw_diag[p, i]:.3g}; {negative.size} sample"
            f"{'s' if negative.size > 1 else ''} in all), which no kernel (similarity) matrix has; a distance "
            f"or dissimilarity matrix is not a kernel (a Gaussian kernel exp(-D2 / mean(D2)) makes one from "
            f"squared distances D2)"
        )
    bad = np.flatnonzero(centred_diag[p] <= tol)
    if bad.size:
        i = int(bad[0])
        raise KernelInputError(
            f"{names[p]}{of}, sample {i}: after centring its diagonal entry is {centred_diag[p, i]:.3g} "
            f"(raw {raw_diag[p, i]:.3g}), not above 1e-10 x max|K| = {tol:.3g}: the sample sits at the "
            f"kernel's mean in feature space and its row cannot be normalised"
            + (f" ({bad.size} samples in all)" if bad.size > 1 else "")
        )
