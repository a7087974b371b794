"""Input limits: refuse, with the reason, what this machine cannot hold.

bigsearch streams X, but some things it builds are as wide as a row: the featurization
plan (a record per input feature), a float64 row of the transform and its copies, the
random Fourier feature weights (input width x D), and the store on disk (rows x width).
Each is checked against what the machine can give before it is allocated, so a
21-byte file naming feature 2,000,000,000 is refused at once instead of allocating
until the kernel kills the process. docs/reliability.md lists the limits.

Memory available = the smallest of MemAvailable, the address-space limit (ulimit -v)
and the cgroup's memory.max; a check passes when the need is at most MEMORY_FRACTION of
it. $BIGSEARCH_MEMORY_BYTES sets the available memory by hand (e.g. on a shared host).
"""

import math
import os
import resource
import shutil
from pathlib import Path

import numpy as np

from .errors import DataError, ResourceError

MEMORY_ENV = "BIGSEARCH_MEMORY_BYTES"
MEMORY_FRACTION = 0.5
# Per input feature while ingesting: its column and plan records (Python objects, about
# 400 bytes) and four float64 copies in a one-row transform step.
BYTES_PER_FEATURE = 512
# Values whose square (and the float64 sums of n r such products the engine forms)
# would overflow float64 are refused: sqrt(1.8e308 / 1e8) is about 1.3e150.
MAX_ABS_VALUE = 1e150


def available_memory():
    """Bytes a new allocation can get: MemAvailable, the address-space limit and the
    cgroup limit, whichever is smallest (or $BIGSEARCH_MEMORY_BYTES when set)."""
    if os.environ.get(MEMORY_ENV):
        return int(float(os.environ[MEMORY_ENV]))
    have = [_meminfo_available()]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        have.append(soft)
    have.append(_cgroup_limit())
    return min(h for h in have if h)


def open_files_allowed():
    """How many files this process may have open at once (the soft RLIMIT_NOFILE, `ulimit -n`)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return math.inf if soft == resource.RLIM_INFINITY else soft


def _meminfo_available():
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _cgroup_limit():
    try:
        value = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return None
    return int(value) if value.isdigit() else None


def check_memory(need, what, fix):
    """Raise ResourceError when ``need`` bytes exceed what this machine can give."""
    have = available_memory()
    if need > MEMORY_FRACTION * have:
        raise ResourceError(f"{what} need about {_size(need)} of memory, more than this machine can give "
                            f"({_size(have)} available); {fix}")


def check_features(n_features, where, fix="check the input, or pass fewer features"):
    """A width of ``n_features`` input features must fit a one-row transform step."""
    check_memory(int(n_features) * BYTES_PER_FEATURE, f"{where}: {int(n_features):,} features", fix)


def check_rff(input_width, dim):
    """The random Fourier feature weights (input width x D, float64) and a few rows of D."""
    need = (int(input_width) + 5) * int(dim) * 8
    check_memory(need, f"rff {int(dim):,} random features on {int(input_width):,} encoded features",
                 "choose a smaller rff D (the paper uses a few hundred to a few thousand)")


def check_disk(out, rows, width, itemsize):
    """The uncompressed store (rows x width) must fit the free space beside ``out``."""
    if not rows:
        return
    need = int(rows) * int(width) * int(itemsize)
    parent = Path(out).absolute().parent
    while not parent.exists():
        parent = parent.parent
    free = shutil.disk_usage(parent).free
    if need > free:
        raise ResourceError(f"the store would take about {_size(need)} ({int(rows):,} rows x {int(width):,} "
                            f"features), more than the {_size(free)} free on the disk of {parent}; "
                            "write it elsewhere, or use fewer features (rff D, features.drop)")


def file_size_limit():
    """The largest file this process may write, in bytes (RLIMIT_FSIZE, which bash's
    ``ulimit -f`` sets in 1024-byte blocks); None when there is no limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def check_values(X, dtype, where):
    """Features written to a store of ``dtype`` must stay finite there and in the engine's
    float64 sums; ``where(i)`` names row i. Raises DataError naming the first bad row."""
    limit = min(MAX_ABS_VALUE, float(np.finfo(dtype).max))
    if X.size == 0 or (X.max() <= limit and X.min() >= -limit):    # false for NaN too: one pass each
        return
    big = np.abs(X) > limit
    bad = ~np.isfinite(X) | big
    if bad.any():
        row, col = np.argwhere(bad)[0]
        value = X[row, col]
        reason = ("is not finite" if not math.isfinite(value) else
                  f"is too large (at most {limit:.3g} in magnitude: the store holds {np.dtype(dtype).name} "
                  "and the engine sums products of features in float64)")
        raise DataError(f"{where(int(row))}: feature {int(col)} = {value:.6g} {reason}; "
                        "rescale the input or use features.normalize")


def _size(n):
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:,} bytes"
