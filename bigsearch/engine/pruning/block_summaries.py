"""Block summaries: what bounds a block's rows without reading them (engine/pruning/las.py),
computed by one pass over X (``compute_summaries``) or read from the store
(engine/pruning/summaries.py). Both of those modules import this one, and it neither of them.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...backends import ChunkStep
from ...storage.encoding import decode, n_rows
from ..core.params import DEFAULT_BLOCK_ROWS, check_block_rows  # noqa: F401 (re-exported)
from ..core.steps import BLAS_ROWS

DEFAULT_BASIS = 32
GROUP_BLOCKS = 64  # blocks per group: a query bounds every group, then the blocks of the groups that can win
WIDEN = 1e-12  # a group's box and radii widened by this times its largest row norm (their rounding)


@dataclass
class BlockSummaries:
    """Per block (nb blocks): where it is, and what bounds its rows without reading them."""

    block_rows: int
    chunk: np.ndarray  # (nb,) chunk holding the block
    start: np.ndarray  # (nb,) first global row
    stop: np.ndarray  # (nb,) one past the last global row
    basis: np.ndarray  # (r, p) orthonormal columns
    centre: np.ndarray  # (nb, r) mean row
    lo: np.ndarray  # (nb, p) box of P^T (x - centre)
    hi: np.ndarray
    radius_perp: np.ndarray  # (nb,) max ||(I - P P^T)(x - centre)||
    radius: np.ndarray  # (nb,) max ||x - centre||
    norm_max: np.ndarray  # (nb,) max ||x||
    deg_min: np.ndarray  # (nb,)
    deg_max: np.ndarray
    groups: "BlockSummaries | None" = None  # of groups of GROUP_BLOCKS blocks (``grouped``)

    @property
    def n_blocks(self):
        return len(self.start)

    @property
    def radii(self):
        """What the bound kernel takes besides the centre and the box."""
        return self.radius_perp, self.radius, self.norm_max, self.deg_min, self.deg_max

    def grouped(self):
        """The summaries of groups of GROUP_BLOCKS consecutive blocks (made once; their
        ``start`` is each group's first block)."""
        if self.groups is None:
            self.groups = group_summaries(self, GROUP_BLOCKS)
        return self.groups

    def nbytes(self):
        return sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))


def block_layout(chunks, block_rows):
    """(chunk, start, stop) of every block: runs of ``block_rows`` rows from each chunk's start."""
    out = [(j, a, min(b, a + block_rows)) for j, (c0, b) in enumerate(chunks) for a in range(c0, b, block_rows)]
    return tuple(np.array(col, np.int64) for col in zip(*out))


def gram_basis(G, p):
    """The top-p eigenvectors of the symmetric r x r matrix G (columns, orthonormal)."""
    G = (G + G.T) / 2
    _, vecs = np.linalg.eigh(G)
    return np.ascontiguousarray(vecs[:, ::-1][:, : min(p, G.shape[0])])


class SummaryColumns(NamedTuple):
    """One chunk's block summaries: BlockSummaries' per-block fields, centre to deg_max."""

    centre: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    radius_perp: np.ndarray
    radius: np.ndarray
    norm_max: np.ndarray
    deg_min: np.ndarray
    deg_max: np.ndarray


def summary_step(x, state, basis, block_rows):
    """One chunk's block summaries (see BlockSummaries), from x and the chunk's degrees
    (all 1 for a method that keeps none: its scores are linear in x)."""
    m = n_rows(x)
    starts = np.arange(0, m, block_rows)
    parts = []
    group = block_rows * max(1, BLAS_ROWS // block_rows)  # whole blocks per float64 copy
    for g0 in range(0, m, group):
        xb = decode(x, g0, g0 + group)
        local, sizes, centre = block_centres(xb, block_rows)
        D = xb - np.repeat(centre, sizes, axis=0)
        Z = D @ basis
        E = D - Z @ basis.T
        deg = state.deg[g0 : g0 + len(xb)] if hasattr(state, "deg") else np.ones(len(xb))
        parts.append(
            (
                centre,
                np.minimum.reduceat(Z, local, axis=0),
                np.maximum.reduceat(Z, local, axis=0),
                np.sqrt(np.maximum.reduceat(np.einsum("ij,ij->i", E, E), local)),
                np.sqrt(np.maximum.reduceat(np.einsum("ij,ij->i", D, D), local)),
                np.sqrt(np.maximum.reduceat(np.einsum("ij,ij->i", xb, xb), local)),
                np.minimum.reduceat(deg, local),
                np.maximum.reduceat(deg, local),
            )
        )
    assert sum(len(p[0]) for p in parts) == len(starts)
    return SummaryColumns(*(np.concatenate(col) for col in zip(*parts)))


def block_centres(xb, block_rows):
    """Each block of ``block_rows`` rows of a float64 group (the last may be shorter): its
    first row, size and centroid. Whole blocks are summed by a reshape, 10x faster than
    ``np.add.reduceat`` along axis 0."""
    local = np.arange(0, len(xb), block_rows)
    sizes = np.diff(np.append(local, len(xb)))
    whole = len(xb) // block_rows * block_rows
    sums = xb[:whole].reshape(-1, block_rows, xb.shape[1]).sum(axis=1)
    if whole < len(xb):
        sums = np.vstack([sums, xb[whole:].sum(axis=0)])
    return local, sizes, sums / sizes[:, None]


# It reads the chunk's degrees, state it did not create.
SUMMARY = ChunkStep(summary_step)


def compute_summaries(mapper, chunks, basis, block_rows):
    """Every block's summary in one pass (``mapper`` is a backend's ``map``)."""
    chunk, start, stop = block_layout(chunks, block_rows)
    cols = [np.concatenate(col) for col in zip(*mapper(SUMMARY, basis, block_rows))]
    return BlockSummaries(block_rows, chunk, start, stop, basis, *cols)


def group_summaries(sm, group_blocks):
    """Summaries of groups of consecutive blocks, of the blocks' form, from the blocks'
    alone: a group's centre C is the mean of its blocks' centres, and a row x of block b
    has x - C = (x - c_b) + (c_b - C), so the group's box, residual radius and radius are
    its blocks' shifted by c_b - C (the triangle inequality), widened by WIDEN relative
    for the rounding of that shift. Bounds of a group hold for every row in it."""
    first = np.arange(0, sm.n_blocks, group_blocks)
    sizes = np.diff(np.append(first, sm.n_blocks))
    cols = []
    step = max(1, (1 << 16) // group_blocks)  # groups per slice: bounded temporaries
    for g0 in range(0, len(first), step):
        b0, b1 = first[g0], first[g0 + step] if g0 + step < len(first) else sm.n_blocks
        local, n = first[g0 : g0 + step] - b0, sizes[g0 : g0 + step]
        C = np.add.reduceat(sm.centre[b0:b1], local, axis=0) / n[:, None]
        D = sm.centre[b0:b1] - np.repeat(C, n, axis=0)
        Z = D @ sm.basis
        perp = np.linalg.norm(D - Z @ sm.basis.T, axis=1)
        norm_max = np.maximum.reduceat(sm.norm_max[b0:b1], local)
        pad = WIDEN * norm_max
        cols.append(
            (
                C,
                np.minimum.reduceat(Z + sm.lo[b0:b1], local, axis=0) - pad[:, None],
                np.maximum.reduceat(Z + sm.hi[b0:b1], local, axis=0) + pad[:, None],
                np.maximum.reduceat(perp + sm.radius_perp[b0:b1], local) + pad,
                np.maximum.reduceat(np.linalg.norm(D, axis=1) + sm.radius[b0:b1], local) + pad,
                norm_max,
                np.minimum.reduceat(sm.deg_min[b0:b1], local),
                np.maximum.reduceat(sm.deg_max[b0:b1], local),
            )
        )
    return BlockSummaries(
        sm.block_rows,
        sm.chunk[first],
        first,
        np.append(first[1:], sm.n_blocks),
        sm.basis,
        *(np.concatenate(col) for col in zip(*cols)),
    )
