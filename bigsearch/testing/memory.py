"""Measuring what a piece of work adds to a process's memory (tests and benchmarks).

getrusage's ru_maxrss is not enough on Linux: a process started by fork + exec keeps
its parent's peak from before the exec (a test runner that has grown to 500 MB gives
every child a 500 MB "peak"). The kernel's own high-water mark, VmHWM, starts afresh at
exec and can be reset to the current RSS (``echo 5 > /proc/self/clear_refs``), so the
peak of exactly the measured work is VmHWM after it minus the RSS before it.
"""

import resource


def _status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def start_peak_measurement():
    """Reset the high-water mark to the current RSS and return the current RSS (bytes)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass                    # not permitted here: VmHWM then includes earlier peaks of this image
    return _status("VmRSS")


def peak_rss():
    """The highest RSS of this process image so far (bytes), since the last reset."""
    try:
        return _status("VmHWM")
    except (OSError, KeyError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
