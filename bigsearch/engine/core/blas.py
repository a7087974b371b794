"""How many threads BLAS may use for a piece of work."""

import functools
import os

from threadpoolctl import ThreadpoolController


@functools.cache
def _controller():
    return ThreadpoolController()


PARALLEL_WORK = 1e8  # multiply-adds: a smaller product runs on one BLAS thread (blas_threads)


def blas_threads(multiply_adds):
    """BLAS on every core for a product of at least PARALLEL_WORK multiply-adds, else on
    one thread. After a call on several threads, OpenBLAS's threads spin for about 0.1 s
    (2^28 cycles) on the cores the next pass needs: on two cores (AMD EPYC, 1M x 128), each
    fold of K^-1 (every 64 labels) and each drift check, 1-4 million multiply-adds done in
    0.1-0.3 ms, slowed the 5-8 LAS iterations after it from 12-14 ms to 20-24 ms. Above
    the threshold (milliseconds on one thread: r = 2,048's folds and drift checks, a batch's
    products, 5 x 10^8 and more for a batch of 500 at r = 2,048) the second core pays for it."""
    return blas_on_all_cores() if multiply_adds >= PARALLEL_WORK else one_blas_thread()


def blas_on_all_cores():
    """BLAS limited to the cores this process may use (not more: BLAS's own default may
    count the host's)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return _controller().limit(limits=cores, user_api="blas")


def one_blas_thread():
    """BLAS on one thread: for work on a thread beside another busy one (a writer), where
    BLAS's threads would spin against it (4x slower, measured on 2 cores)."""
    return _controller().limit(limits=1, user_api="blas")
