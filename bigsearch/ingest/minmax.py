"""An explicit random-feature map of the MinMax (weighted Tanimoto) kernel (``ingest --minmax``).

For non-negative vectors x, x' the MinMax kernel is

    K(x, x') = sum_k min(x_k, x'_k) / sum_k max(x_k, x'_k),

the Tanimoto (Jaccard) similarity when x and x' are binary fingerprints, and a positive
definite kernel. Consistent weighted sampling (Ioffe, "Improved consistent sampling,
weighted minhash and L1 sketching", ICDM 2010) draws from x one pair h(x) = (k*, t*)
such that, over the random draw,

    P[h(x) = h(x')] = K(x, x')      exactly.

With D independent draws and each pair hashed into one of B buckets, the feature vector
z(x) has D blocks of B entries; block d holds 1/sqrt(D) at the bucket of draw d. Then

    E[z(x) . z(x')] = P[same bucket] = K^p + (1 - K^p) / B

exactly in expectation, where p = ``power``: a draw of power p hashes p independent CWS
pairs together, so two points share it with probability K^p (a sharper kernel, closer to
a nearest-neighbour graph). The inner product is an affine function of K^p with positive
slope (1 - 1/B) and intercept 1/B, like unit rows plus a bias feature; every z(x) has unit
norm and every similarity is >= 0, so LAS degrees are positive. Its standard deviation
is at most 1 / (2 sqrt(D)).

The random numbers (Gamma(2, 1) r and c, uniform beta for each draw and feature) come from
``numpy.random.default_rng([seed, 2])``, and the bucket of a draw from a SplitMix64 hash
of (draw, k*, t*) salted by the same generator, so the map depends on the seed only.
"""

import numba
import numpy as np

from ..errors import InputError, ParameterError

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def check_minmax(spec):
    """spec: {"samples": D, "buckets": B, "power": p, "seed": S}."""
    if spec["samples"] < 1:
        raise ParameterError("minmax D needs D >= 1 samples")
    if spec["buckets"] < 2:
        raise ParameterError("minmax_buckets B needs B >= 2")
    if not 1 <= spec["power"] <= 8:
        raise ParameterError("minmax_power p must be between 1 and 8")


def minmax_width(spec):
    return spec["samples"] * spec["buckets"]


def minmax_params(r, spec):
    """The random numbers of the map for inputs of r features: (log r, log c, beta, salts)."""
    rng = np.random.default_rng([spec["seed"], 2])
    draws = spec["samples"] * spec["power"]
    gamma_r = rng.gamma(2.0, 1.0, (draws, r))
    log_c = np.log(rng.gamma(2.0, 1.0, (draws, r)))
    beta = rng.uniform(0.0, 1.0, (draws, r))
    salts = rng.integers(0, 2**63 - 1, draws, dtype=np.int64).astype(np.uint64)
    return gamma_r, log_c, beta, salts


def minmax_features(Z, spec, params):
    """z(Z) as the module docstring defines it: (m, D * B) float64."""
    if Z.size and Z.min() < 0:
        row = int(np.argwhere(Z < 0)[0][0])
        raise InputError(f"minmax needs non-negative features; row {row} of the block has a negative one")
    buckets = cws_buckets(np.ascontiguousarray(Z, np.float64), *params, spec["power"], spec["buckets"])
    D, B = spec["samples"], spec["buckets"]
    out = np.zeros((len(Z), D * B))
    rows = np.repeat(np.arange(len(Z)), D)
    cols = (np.arange(D) * B)[None, :] + buckets
    nonzero = np.repeat(Z.any(axis=1), D)  # an all-zero row stays all zero
    out[rows[nonzero], cols.ravel()[nonzero]] = 1.0 / np.sqrt(D)
    return out


@numba.njit(cache=True, nogil=True)
def _mix(h):
    """SplitMix64's finalizer: a well-spread 64-bit hash of h."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def cws_buckets(Z, gamma_r, log_c, beta, salts, power, n_buckets):
    """Per row and per feature block d: the bucket of the power CWS draws of block d.

    Draw s of row x (Ioffe 2010): for each k with x_k > 0, t_k = floor(ln x_k / r_k +
    beta_k), ln a_k = ln c_k - r_k (t_k - beta_k) - r_k; the pair is (k*, t_k*) with
    k* = argmin_k ln a_k (ties: lowest k)."""
    m, r = Z.shape
    n_blocks = gamma_r.shape[0] // power
    out = np.zeros((m, n_blocks), np.int64)
    nz = np.empty(r, np.int64)
    for i in range(m):
        n_nz = 0
        for k in range(r):
            if Z[i, k] > 0:
                nz[n_nz] = k
                n_nz += 1
        if n_nz == 0:
            continue
        for d in range(n_blocks):
            h = np.uint64(d) * GOLDEN
            for p in range(power):
                s = d * power + p
                best, best_k, best_t = np.inf, -1, 0
                for j in range(n_nz):
                    k = nz[j]
                    t = np.floor(np.log(Z[i, k]) / gamma_r[s, k] + beta[s, k])
                    log_a = log_c[s, k] - gamma_r[s, k] * (t - beta[s, k]) - gamma_r[s, k]
                    if log_a < best:
                        best, best_k, best_t = log_a, k, np.int64(t)
                h = _mix(h ^ salts[s] ^ (np.uint64(best_k) * GOLDEN) ^ _mix(np.uint64(best_t + (1 << 40))))
            out[i, d] = np.int64(h % np.uint64(n_buckets))
    return out


def minmax_kernel(A, B):
    """The exact MinMax kernel between the rows of A and of B (for tests and small data)."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    num = np.minimum(A[:, None, :], B[None, :, :]).sum(axis=2)
    den = np.maximum(A[:, None, :], B[None, :, :]).sum(axis=2)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
