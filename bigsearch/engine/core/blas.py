"""How many threads BLAS may use for a piece of work, and the BLAS call NumPy lacks."""

import ctypes
import functools
import os

import numpy as np
import scipy.linalg.cython_blas
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


def times_lower_in_place(Y, L):
    """Y <- Y L in place (Y: k x r, C order; L: r x r lower triangular, Fortran order), by
    BLAS's trmm, which skips L's zero triangle at full speed. Called through SciPy's BLAS
    by ctypes, which releases Python's lock, as NumPy's products do (scipy.linalg.blas.dtrmm
    holds it: the chunk pool's threads would take turns)."""
    k, r = Y.shape
    if not (Y.flags.c_contiguous and L.flags.f_contiguous and Y.dtype == L.dtype == np.float64 and L.shape == (r, r)):
        raise ValueError("times_lower_in_place needs float64 Y in C order and L (r x r) in Fortran order")
    if k == 0 or r == 0:
        return
    # In Fortran's column-major terms Y is Y^T (r x k): Y^T <- L^T Y^T.
    m, n, one = ctypes.c_int(r), ctypes.c_int(k), ctypes.c_double(1.0)
    _dtrmm()(
        b"L",
        b"L",
        b"T",
        b"N",
        ctypes.byref(m),
        ctypes.byref(n),
        ctypes.byref(one),
        L.ctypes.data,
        ctypes.byref(m),
        Y.ctypes.data,
        ctypes.byref(m),
    )


@functools.cache
def _dtrmm():
    """SciPy's Fortran dtrmm (scipy.linalg.cython_blas exports its address) as a ctypes function."""
    capsule = scipy.linalg.cython_blas.__pyx_capi__["dtrmm"]
    name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
    pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi)
    )
    text, number = ctypes.c_char_p, ctypes.c_void_p
    signature = ctypes.CFUNCTYPE(None, text, text, text, text, number, number, number, number, number, number, number)
    return signature(pointer(capsule, name(capsule)))
