"""kernels/rows.py: products of blocks of rows with a small matrix, against NumPy, and the
same bits for a row wherever it sits (its place in a tile, a panel or a block; the size of
the block), which BLAS does not promise (issue 40, item 2)."""

import numpy as np
import pytest

from bigsearch.kernels.rows import (
    PANEL_ROWS,
    TILE_COLUMNS,
    add_signed_and_absolute,
    packed_tiles,
    product_buffer,
    row_products,
    row_squares,
    rows_product,
    rows_times,
    subtract_weighted_squares,
)


def product(Y, M, lower=False):
    if not lower:
        return rows_product(Y, M)
    out = product_buffer(len(Y), M.shape[1])
    rows_times(np.ascontiguousarray(Y, dtype=np.float64), packed_tiles(M), lower, out)
    return out[:, : M.shape[1]]


@pytest.mark.parametrize("r", [1, 5, 17, 130, 300])
@pytest.mark.parametrize("k", [1, 3, TILE_COLUMNS, TILE_COLUMNS + 1, 40])
def test_rows_times_is_the_product(r, k):
    rng = np.random.default_rng(r * 100 + k)
    Y, M = rng.normal(size=(37, r)), rng.normal(size=(r, k))
    expected = Y @ M
    assert np.abs(product(Y, M) - expected).max() <= 1e-13 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("r", [1, 7, 16, 33, 300])
def test_lower_skips_only_zeros(r):
    rng = np.random.default_rng(r)
    L = np.tril(rng.normal(size=(r, r)))
    Y = rng.normal(size=(9, r))
    expected = Y @ L
    assert np.abs(product(Y, L, lower=True) - expected).max() <= 1e-13 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("m", [1, 3, 4, 5, 257, PANEL_ROWS + 3, 600])
@pytest.mark.parametrize("r", [5, 130, 300])
def test_a_row_gets_the_same_bits_wherever_it_sits(lower, m, r):
    rng = np.random.default_rng(m + r)
    M = np.tril(rng.normal(size=(r, r))) if lower else rng.normal(size=(r, 40))
    x = rng.normal(size=r)
    alone = product(x[None, :], M, lower)[0]
    Y = rng.normal(size=(m, r))
    places = sorted({0, m // 2, m - 1} | set(range(min(m, 9))))
    Y[places] = x
    P = product(Y, M, lower)
    for t in places:
        np.testing.assert_array_equal(P[t], alone)


def test_the_per_row_reductions():
    rng = np.random.default_rng(3)
    Z, Y = rng.normal(size=(11, 32)), rng.normal(size=(11, 20))
    out = np.empty(11)
    row_squares(Z, out)
    np.testing.assert_allclose(out, (Z * Z).sum(axis=1), rtol=1e-14)
    row_products(Z, Y, out)  # over Y's 20 columns (Z is padded wider)
    np.testing.assert_allclose(out, (Z[:, :20] * Y).sum(axis=1), rtol=1e-14)
    c = rng.random(5)
    J = np.ones(11)
    subtract_weighted_squares(Z, c, J)
    np.testing.assert_allclose(J, 1 - (Z[:, :5] ** 2) @ c, rtol=1e-14)
    num, den, signs = np.zeros(11), np.zeros(11), np.array([1.0, -1.0, 1.0])
    add_signed_and_absolute(Z, signs, num, den)
    np.testing.assert_allclose(num, Z[:, :3] @ signs, rtol=1e-14)
    np.testing.assert_allclose(den, np.abs(Z[:, :3]).sum(axis=1), rtol=1e-14)
