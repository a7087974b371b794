"""Kernels: pure numba functions over arrays (a chunk of X, its per-point state, small
global state), with no I/O and no global Python state, so any backend can map them."""
