"""The losses of the data objectives, and their math on one chunk of samples.

f(X) = s sum_j c_j h(X^T y_j - b_j) (+ mu ||X||_1) is defined by its row loss h:

* `EntrywiseLoss`: h(z) = sum_k phi(z_k). The partial subgradient on the columns C is
  Yt phi'(Z_C - B_C) (Prop. ``prop-structural``): it reads only the rows C of the cached
  Z^T = X^T Yt. ODL (phi = abs, Section 5.2), l1 Procrustes, sparse PCA (phi = -t^2).
* `NormLoss`: h(z) = psi(||z||). The weights psi'(r_j) / r_j need the whole-row norms
  r_j, kept as per-block sums of squares; the blocks that changed are recomputed from
  their rows, never updated by differences, so nothing drifts. DPCP (psi(r) = r,
  eq. ``eq-RSR``) and its Huber smoothing.

A *kernel* (`EntrywiseKernel`, `NormKernel`) is that math on one chunk of samples, in
place on the chunk's arrays (`rssm.data.engine`): it declares the per-sample state it
keeps beside the cache rows (``state``: name -> leading shape; the sample axis is
last), its per-sample scratch and its per-column arrays, and implements

* ``after_update(ch, cols)``: the statistics after the cache rows ``cols`` changed;
* ``cost(ch)``: the chunk's share of sum_j c_j h(.) (a float);
* ``weights(ch, runs, out)``: dh/dZ for the rows ``runs`` of Z^T, into ``out``.

A new loss of either family is a new `EntrywiseLoss` / `NormLoss`; a new family is a new
kernel here. Each costs O(k |C|) on a chunk of k samples, so an RSSM iteration stays
O(m n |C|) (Prop. ``prop-periteration``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rssm._validation import as_positive_float
from rssm.blocks import ColumnSet, Partition, _mask_runs

# EntrywiseLoss and NormLoss are public as rssm.problems.EntrywiseLoss / NormLoss (and
# documented there); this module's own names are the kernels.
__all__ = ["EntrywiseKernel", "NormKernel", "make_kernel"]

ArrayFn = Callable[[np.ndarray], np.ndarray]


def _in_place(fn) -> Callable:
    """Mark ``fn(t, out=None)`` as writing into ``out`` (the kernels then allocate nothing)."""
    fn.supports_out = True
    return fn


def _on_view(fn: ArrayFn, t: np.ndarray):
    """fn(t) on a read-only view of ``t``: t may be the oracle's cache (X^T Y, or the row
    norms), which a loss function that works in place (t *= t) corrupted without a word,
    and only where no offset was given (a user's audit); such a function is refused."""
    view = t.view()
    view.flags.writeable = False
    try:
        return fn(view)
    except ValueError as exc:
        if "read-only" not in str(exc):
            raise
        raise ValueError(
            f"a loss function ({getattr(fn, '__name__', type(fn).__name__)}) changed its "
            "input in place; it must return a new array (t * t, not t *= t): its input is "
            "the problem's cache") from None


def _apply(fn: ArrayFn, t: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = fn(t), in place when fn is a ufunc or marked `_in_place` (t may be out)."""
    if isinstance(fn, np.ufunc) or getattr(fn, "supports_out", False):
        fn(t, out=out)
    else:
        res = _on_view(fn, t)
        if np.shape(res) != t.shape:
            # (assigning would broadcast a scalar or a row: a wrong cost, silently)
            raise ValueError(
                f"a loss function ({getattr(fn, '__name__', type(fn).__name__)}) must act "
                f"elementwise: given an array of shape {t.shape} it returned shape "
                f"{np.shape(res)}; EntrywiseLoss's value and derivative take phi and phi' "
                "entry by entry (np.abs, not a sum of it)")
        out[...] = res
    return out


def _per_sample(fn: ArrayFn, r: np.ndarray) -> np.ndarray:
    """fn(r) for a `NormLoss`'s psi or psi', checked to act per sample, as `_apply` checks
    an `EntrywiseLoss` (a user's audit: ``NormLoss(lambda r: r.mean(), ...)`` gave a cost
    of 1.54 where the per-sample terms sum to 61.5, without a word)."""
    res = np.asarray(_on_view(fn, r), dtype=np.float64)
    if res.shape != r.shape:
        raise ValueError(
            f"a loss function ({getattr(fn, '__name__', type(fn).__name__)}) must act per "
            f"sample: given the {r.shape[0]} row norms it returned shape {res.shape}; "
            "NormLoss's value and derivative take psi and psi' norm by norm (np.log1p(r), "
            "not a mean of it)")
    return res


@_in_place
def _neg_square(t, out=None):
    out = np.multiply(t, t, out=out)
    return np.negative(out, out=out)


@_in_place
def _neg_square_derivative(t, out=None):
    return np.multiply(t, -2.0, out=out)


def _identity(r):
    return r


def _one(r):
    return np.ones_like(r)


@dataclass(frozen=True)
class EntrywiseLoss:
    """h(z) = sum_k phi(z_k) for a scalar function phi applied entry by entry.

    Parameters
    ----------
    value : callable
        ``value(t)`` returns phi(t) elementwise for an ndarray ``t``.
    derivative : callable
        ``derivative(t)`` returns, elementwise, an element of the Clarke subdifferential
        of phi at t (e.g. sign(t) for |t|, with 0 at t = 0).
    name : str
        Label used in ``repr``.
    flops : float
        Flop-model cost of one ``derivative`` evaluation per entry.

    Notes
    -----
    A NumPy ufunc (``numpy.abs``, ``numpy.sign``) is called with ``out=`` and allocates
    nothing; so is a function with the attribute ``supports_out = True`` that accepts
    ``out=``. Other callables return a new array, copied into the oracle's buffers.
    """

    value: ArrayFn
    derivative: ArrayFn
    name: str = "entrywise"
    flops: float = 1.0

    def __post_init__(self) -> None:
        _check_loss(self)

    @classmethod
    def l1(cls) -> EntrywiseLoss:
        """phi(t) = |t| (ODL, l1 Procrustes); phi'(0) := 0."""
        return cls(np.abs, np.sign, "l1", 1.0)

    @classmethod
    def huber(cls, delta: float = 1.0) -> EntrywiseLoss:
        """phi(t) = t^2 / (2 delta) for |t| <= delta, |t| - delta / 2 beyond.

        Smooth with a Lipschitz derivative; it behaves as |t| for large residuals.

        Parameters
        ----------
        delta : float, default=1.0
            The threshold delta > 0 between the quadratic and the linear part.

        Returns
        -------
        EntrywiseLoss
            The loss, named ``huber(delta)``, with phi'(t) = clip(t / delta, -1, 1).
        """
        d = as_positive_float(delta, "delta")

        def value(t: np.ndarray) -> np.ndarray:
            a = np.abs(t)
            return np.where(a <= d, 0.5 * t * t / d, a - 0.5 * d)

        @_in_place
        def derivative(t: np.ndarray, out=None) -> np.ndarray:
            out = np.divide(t, d, out=out)
            return np.clip(out, -1.0, 1.0, out=out)

        return cls(value, derivative, f"huber({d:g})", 3.0)

    @classmethod
    def neg_square(cls) -> EntrywiseLoss:
        """phi(t) = -t^2: the variance term of PCA, -||Y^T X||_F^2 (concave, smooth)."""
        return cls(_neg_square, _neg_square_derivative, "neg_square", 1.0)


def _check_loss(loss) -> None:
    """Refuse a loss whose value or derivative is not callable, or whose name or flops
    are of the wrong kind, where it is made (``EntrywiseLoss(1, 2)`` was accepted, and
    failed inside `rssm.minimize` with "'int' object is not callable")."""
    kind = type(loss).__name__
    for field in ("value", "derivative"):
        fn = getattr(loss, field)
        if not callable(fn):
            raise TypeError(f"{kind}: {field} must be a callable applied to an ndarray "
                            f"elementwise (e.g. numpy.abs), got {type(fn).__name__}")
    if not isinstance(loss.name, str):
        raise TypeError(f"{kind}: name must be a str, got {type(loss.name).__name__}")
    as_positive_float(loss.flops, f"{kind}: flops", allow_zero=True)


@dataclass(frozen=True)
class NormLoss:
    """h(z) = psi(||z||_2) for a scalar function psi of the row norm r = ||z|| >= 0.

    Parameters
    ----------
    value : callable
        ``value(r)`` returns psi(r) elementwise (r >= 0).
    derivative : callable
        ``derivative(r)`` returns psi'(r) elementwise (an element of the subdifferential at
        kinks). Where r = 0 the weight psi'(r) / r is taken as 0, which is valid when
        psi'(0) = 0 or psi is the norm itself (0 lies in the unit ball).
    name : str
        Label used in ``repr``.
    flops : float
        Flop-model cost of ``derivative`` per row.
    """

    value: ArrayFn
    derivative: ArrayFn
    name: str = "norm"
    flops: float = 1.0

    def __post_init__(self) -> None:
        _check_loss(self)

    @classmethod
    def norm(cls) -> NormLoss:
        """psi(r) = r: the DPCP loss ||z|| (eq. ``eq-RSR``)."""
        return cls(_identity, _one, "norm", 0.0)

    @classmethod
    def huber(cls, delta: float = 1.0) -> NormLoss:
        """psi(r) = r^2 / (2 delta) for r <= delta, r - delta / 2 beyond (smoothed DPCP).

        Parameters
        ----------
        delta : float, default=1.0
            The threshold delta > 0 between the quadratic and the linear part.

        Returns
        -------
        NormLoss
            The loss, named ``huber_norm(delta)``, with psi'(r) = min(r / delta, 1).
        """
        d = as_positive_float(delta, "delta")
        return cls(
            lambda r: np.where(r <= d, 0.5 * r * r / d, r - 0.5 * d),
            lambda r: np.minimum(r / d, 1.0),
            f"huber_norm({d:g})",
            2.0,
        )

    @property
    def is_norm(self) -> bool:
        """True for psi(r) = r (`norm`): the weights are then s c_j / r_j."""
        return self.value is _identity and self.derivative is _one


# -- kernels: the math on one chunk -----------------------------------------------------------
def _resid(ch, run: slice, buf: np.ndarray | None = None) -> np.ndarray:
    """The rows ``run`` of Z^T - B^T on the chunk (written into ``buf``, or into the
    chunk's scratch rows, when B is given)."""
    if ch.bt is None:
        return ch.zt[run]
    if buf is None:
        buf = ch.w[: run.stop - run.start]
    return np.subtract(ch.zt[run], ch.bt[run], out=buf)


class EntrywiseKernel:
    """`EntrywiseLoss` on a chunk. Per-column state: the cost of each row of Z^T on the
    chunk (``rowc``) and whether it is stale; a cost recomputes only the rows that changed
    since the last one (O(k |C|) after an RSSM step), each from scratch.

    Parameters
    ----------
    loss : EntrywiseLoss
        The loss h(z) = sum_k phi(z_k).
    p : int
        The number of columns of X (rows of Z^T).
    """

    state: dict = {}
    scratch: dict = {}

    def __init__(self, loss: EntrywiseLoss, p: int):
        self.loss = loss
        self.p = p
        self.columns = {"rowc": ((p,), np.float64, 0.0), "stale": ((p,), np.bool_, True)}

    def after_update(self, ch, cols: ColumnSet | None) -> None:
        """Mark the rows ``cols`` of Z^T on the chunk as stale, so that the next `cost`
        recomputes their costs.

        Parameters
        ----------
        ch : chunk
            The chunk's arrays (`rssm.data.engine`).
        cols : ColumnSet or None
            The cache rows that changed; None: all of them.
        """
        if cols is None:
            ch.stale.fill(True)
        else:
            for run in cols.runs:
                ch.stale[run] = True

    def cost(self, ch) -> float:
        """The chunk's share of sum_j c_j h(.), recomputing only the stale rows of Z^T.

        Parameters
        ----------
        ch : chunk
            The chunk's arrays (`rssm.data.engine`).

        Returns
        -------
        float
            The sum of the per-row costs (``rowc``), all current on return.
        """
        if ch.stale.any():
            # every column after an RSM step: one run, without searching for runs
            runs = ((slice(0, self.p),) if ch.stale.all()
                    else _mask_runs(ch.stale))
            for run in runs:
                buf = ch.w[: run.stop - run.start]
                val = _apply(self.loss.value, _resid(ch, run, buf), buf)
                if ch.cw is None:
                    np.sum(val, axis=1, out=ch.rowc[run])
                else:
                    np.matmul(val, ch.cw, out=ch.rowc[run])
            ch.stale.fill(False)
        return float(ch.rowc.sum())

    def trial_cost(self, ch, cols: ColumnSet, zc: np.ndarray) -> float:
        """The chunk's cost with the rows ``cols`` of Z^T replaced by ``zc`` (overwritten);
        the per-column costs must be current (`cost` was called).

        Parameters
        ----------
        ch : chunk
            The chunk's arrays (`rssm.data.engine`); left unchanged.
        cols : ColumnSet
            The rows C of Z^T to replace.
        zc : numpy.ndarray, shape (c, k)
            The replacement rows, in the order of ``cols.index`` (c = |C|, k the chunk's
            samples); overwritten with scratch values.

        Returns
        -------
        float
            The sum of the per-row costs, those of ``cols`` computed from ``zc``.
        """
        rc = ch.rowc.copy()
        off = 0
        for run in cols.runs:
            c = run.stop - run.start
            rows = zc[off : off + c]
            if ch.bt is not None:
                np.subtract(rows, ch.bt[run], out=rows)
            val = _apply(self.loss.value, rows, rows)
            if ch.cw is None:
                np.sum(val, axis=1, out=rc[run])
            else:
                np.matmul(val, ch.cw, out=rc[run])
            off += c
        return float(rc.sum())

    def weights(self, ch, runs: tuple[slice, ...], out: np.ndarray) -> None:
        """Write dh/dZ on the rows ``runs`` of Z^T, phi'(Z - B) (times the sample weights
        c_j when given), into ``out``, one run after the other.

        Parameters
        ----------
        ch : chunk
            The chunk's arrays (`rssm.data.engine`).
        runs : tuple of slice
            Contiguous runs of rows of Z^T.
        out : numpy.ndarray
            Filled in place: its first rows, as many as the runs hold, stacked in order.
        """
        off = 0
        for run in runs:
            c = run.stop - run.start
            rows = out[off : off + c]
            _apply(self.loss.derivative, _resid(ch, run, rows), rows)
            if ch.cw is not None:
                np.multiply(rows, ch.cw, out=rows)
            off += c


class NormKernel:
    """`NormLoss` on a chunk. Per-sample state: ``bn`` (l x k), the squared norms of the
    rows of Z - B restricted to each block of columns; ``r`` (k), the row norms; ``scale``
    (k), s c_j psi'(r_j) / r_j (0 where r_j = 0). After an update the blocks that changed
    are recomputed from their rows, then r and the scale from all blocks.

    Parameters
    ----------
    loss : NormLoss
        The loss h(z) = psi(||z||).
    p : int
        The number of columns of X (rows of Z^T).
    partition : Partition or None
        The column blocks of an RSSM run; None (RSM): one block of all p columns.
    scale : float, default=1.0
        The factor s of the sum, applied in the weights ``scale`` (not in `cost`).
    """

    scratch = {"tmp": ((), np.float64), "mask": ((), np.bool_)}
    columns: dict = {}

    def __init__(self, loss: NormLoss, p: int, partition: Partition | None, scale: float = 1.0):
        self.loss = loss
        self.p = p
        self.s = float(scale)
        self.partition = partition
        nb = partition.n_blocks if partition is not None else 1
        self.block_runs = ([partition.columns(b).runs for b in range(nb)]
                           if partition is not None else [(slice(0, p),)])
        self.state = {"bn": (nb,), "r": (), "scale": ()}
        self.is_norm = loss.is_norm

    def after_update(self, ch, cols: ColumnSet | None) -> None:
        """Recompute the squared norms ``bn`` of the blocks that ``cols`` touches, then the
        row norms ``r`` and the weights ``scale`` from all blocks.

        Parameters
        ----------
        ch : chunk
            The chunk's arrays (`rssm.data.engine`).
        cols : ColumnSet or None
            The cache rows that changed; None (or no partition): every block.
        """
        nb = len(self.block_runs)
        blocks = range(nb) if cols is None or self.partition is None else cols.blocks
        for b in blocks:
            row = ch.bn[b]
            for i, run in enumerate(self.block_runs[b]):
                z = _resid(ch, run)
                if i == 0:
                    np.einsum("ij,ij->j", z, z, out=row)
                else:
                    np.einsum("ij,ij->j", z, z, out=ch.tmp)
                    row += ch.tmp
        r = ch.r
        if nb > 1:
            np.add.reduce(ch.bn, axis=0, out=r)
            np.sqrt(r, out=r)
        else:
            np.sqrt(ch.bn[0], out=r)
        np.greater(r, 0.0, out=ch.mask)
        if self.is_norm:
            num = self.s if ch.cw is None else np.multiply(ch.cw, self.s, out=ch.tmp)
        else:
            num = _per_sample(self.loss.derivative, r)
            if ch.cw is not None:
                num = num * ch.cw
            if self.s != 1.0:
                num = num * self.s
        ch.scale.fill(0.0)   # psi'(r) / r := 0 where r = 0 (see NormLoss)
        np.divide(num, r, out=ch.scale, where=ch.mask)

    def cost(self, ch) -> float:
        """The chunk's share of s sum_j c_j psi(r_j), read from the row norms kept by
        `after_update` (the scale s is not applied here).

        Parameters
        ----------
        ch : chunk
            The chunk's arrays (`rssm.data.engine`).

        Returns
        -------
        float
            The sum over the chunk's samples of c_j psi(r_j) (c_j = 1 without sample
            weights).
        """
        return self._cost_of(ch.r, ch.cw)

    def _cost_of(self, r: np.ndarray, cw: np.ndarray | None) -> float:
        v = r if self.is_norm else _per_sample(self.loss.value, r)
        return float(v.sum()) if cw is None else float(v @ cw)

    def trial_cost(self, ch, cols: ColumnSet, zc: np.ndarray) -> float:
        """The chunk's cost with the rows ``cols`` of Z^T replaced by ``zc`` (overwritten):
        the blocks of C recomputed from ``zc``, the others as kept, summed as `after_update`
        sums them.

        Parameters
        ----------
        ch : chunk
            The chunk's arrays (`rssm.data.engine`); its state is left unchanged (its
            scratch ``tmp`` is written).
        cols : ColumnSet
            The rows C of Z^T to replace (whole blocks of the partition).
        zc : numpy.ndarray, shape (c, k)
            The replacement rows, in the order of ``cols.index`` (c = |C|, k the chunk's
            samples); overwritten with scratch values.

        Returns
        -------
        float
            The sum over the chunk's samples of c_j psi(r_j) at the trial rows, as
            `cost` (the scale s is not applied).
        """
        bn = ch.bn.copy()
        blocks = range(len(self.block_runs)) if self.partition is None else cols.blocks
        for b in blocks:
            for i, run in enumerate(self.block_runs[b]):
                at = int(np.searchsorted(cols.index, run.start))
                z = zc[at : at + run.stop - run.start]
                if ch.bt is not None:
                    np.subtract(z, ch.bt[run], out=z)
                if i == 0:
                    np.einsum("ij,ij->j", z, z, out=bn[b])
                else:
                    np.einsum("ij,ij->j", z, z, out=ch.tmp)
                    bn[b] += ch.tmp
        r = np.add.reduce(bn, axis=0) if len(bn) > 1 else bn[0]
        np.sqrt(r, out=r)
        return self._cost_of(r, ch.cw)

    def weights(self, ch, runs: tuple[slice, ...], out: np.ndarray) -> None:
        """Write dh/dZ on the rows ``runs`` of Z^T, (Z - B) scaled per sample by ``scale``
        (s c_j psi'(r_j) / r_j), into ``out``, one run after the other.

        Parameters
        ----------
        ch : chunk
            The chunk's arrays (`rssm.data.engine`).
        runs : tuple of slice
            Contiguous runs of rows of Z^T.
        out : numpy.ndarray
            Filled in place: its first rows, as many as the runs hold, stacked in order.
        """
        off = 0
        for run in runs:
            c = run.stop - run.start
            rows = out[off : off + c]
            np.multiply(_resid(ch, run, rows), ch.scale, out=rows)
            off += c


def make_kernel(loss: EntrywiseLoss | NormLoss, p: int, partition: Partition | None,
                scale: float = 1.0):
    """The kernel of ``loss`` for p columns and RSSM's ``partition`` (None for RSM).
    ``scale`` is the factor s of the whole sum (DPCP: 1/m); entrywise losses take s = 1.

    Parameters
    ----------
    loss : EntrywiseLoss or NormLoss
        The row loss h.
    p : int
        The number of columns of X.
    partition : Partition or None
        The column blocks of an RSSM run, or None for RSM.
    scale : float, default=1.0
        The factor s of the whole sum; must be 1 for an entrywise loss.

    Returns
    -------
    EntrywiseKernel or NormKernel
        The kernel of ``loss``'s family.

    Raises
    ------
    ValueError
        When ``scale`` is not 1 for an `EntrywiseLoss`.
    """
    if isinstance(loss, NormLoss):
        return NormKernel(loss, p, partition, scale)
    if scale != 1.0:
        raise ValueError("an entrywise loss takes no scale; fold it into the loss")
    return EntrywiseKernel(loss, p)
