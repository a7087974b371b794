"""How many threads BLAS may use for a piece of work."""

import functools
import os

from threadpoolctl import ThreadpoolController


@functools.cache
def _controller():
    return ThreadpoolController()


def blas_on_all_cores():
    """BLAS limited to the cores this process may use (not more: BLAS's own default may
    count the host's)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return _controller().limit(limits=cores, user_api="blas")


def one_blas_thread():
    """BLAS on one thread: for work on a thread beside another busy one (a writer), where
    BLAS's threads would spin against it (4x slower, measured on 2 cores)."""
    return _controller().limit(limits=1, user_api="blas")
