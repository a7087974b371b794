"""Work items: a pass shared out over threads, each item with its own sums and candidate lists.

A chunk is cut into work items of ITEM_ROWS rows (from its first row). A kernel that runs
over many chunks at once (kernels/las.py ``update_items``, kernels/blr.py ``blr_items``)
lets its threads take the items in turn; its pass chunk by chunk runs the same items one
after the other. Each item keeps its own sums and candidate lists, merged in order into
its chunk's (``chunk_partials``), so both give the same partials, bit for bit, however the
threads shared the items out.
"""

import numba
import numpy as np

from .common import N_LISTS, TOP_K, candidate_partials, chunk_at, copy_to, new_top, push_top, take_ticket
from .compile_lock import lock_compiles

ITEM_ROWS = 8192  # rows per work item (threads take items in turn; each has its own candidate lists)


@numba.njit(nogil=True, cache=True)
def next_item(counter, items, addresses, starts, x0):
    """The work item a thread takes next (``take_ticket`` on the shared ``counter``): (k,
    its chunk's rows (``chunk_at``), the item's first and end row in the chunk, the chunk's
    first and end global row); k = -1 when every item is taken."""
    k = take_ticket(counter)
    if k >= items.shape[0]:
        return -1, chunk_at(addresses, starts, 0, x0), 0, 0, 0, 0
    j = items[k, 0]
    return k, chunk_at(addresses, starts, j, x0), items[k, 1], items[k, 2], starts[j], starts[j + 1]


@numba.njit(nogil=True, cache=True)
def new_items(n_items):
    """Per work item: sums (n_items, 3) and empty candidate lists (n_items, N_LISTS, TOP_K)."""
    vals = np.full((n_items, N_LISTS, TOP_K), -np.inf)
    return np.zeros((n_items, 3)), vals, np.full((n_items, N_LISTS, TOP_K), -1, np.int64)


@numba.njit(nogil=True, cache=True)  # no fastmath: the sums add item after item
def chunk_partials(sums, vals, idx, k0, k1, offset, f, im):
    """A chunk's partials from its work items k0 <= k < k1 (``update_scores``' return).

    Items come in row order and each list holds its item's best in order (ties: lowest
    index first), so inserting them in turn keeps, among equal values, the lowest
    indices: the lists one pass over the chunk's rows would have made."""
    top_vals, top_idx = new_top(N_LISTS, TOP_K)
    total = np.zeros(3)
    for k in range(k0, k1):
        for q in range(3):
            total[q] += sums[k, q]
        for lst in range(N_LISTS):
            for p in range(TOP_K):
                if idx[k, lst, p] >= 0:
                    push_top(top_vals, top_idx, lst, vals[k, lst, p], idx[k, lst, p])
    return (total,) + candidate_partials(top_vals, top_idx, offset, f, im)


@numba.njit(nogil=True, cache=True)
def items_partials(sums, vals, idx, first, starts, f, im):
    """``chunk_partials`` of every chunk j, from its work items first[j] <= k < first[j + 1]
    and its rows starts[j] <= i < starts[j + 1] of the whole f and im, stacked along a
    first axis of chunks (one call, not one per chunk)."""
    n_chunks = len(starts) - 1
    n_lists, K = vals.shape[1], vals.shape[2]
    totals = np.empty((n_chunks, 3))
    cand = np.empty((n_chunks, n_lists, K), np.int64)
    cf, cim = np.empty((n_chunks, n_lists, K)), np.empty((n_chunks, n_lists, K))
    kth = np.empty((n_chunks, n_lists))
    for j in range(n_chunks):
        a, b = starts[j], starts[j + 1]
        parts = chunk_partials(sums, vals, idx, first[j], first[j + 1], a, f[a:b], im[a:b])
        copy_to(totals[j], parts[0])
        copy_to(cand[j], parts[1])
        copy_to(cf[j], parts[2])
        copy_to(cim[j], parts[3])
        copy_to(kth[j], parts[4])
    return totals, cand, cf, cim, kth


lock_compiles(globals())
