"""Measuring what a piece of work adds to a process's memory (tests and benchmarks).

Two figures, both reported: the **anonymous** memory (RssAnon: heap, per-point state,
buffers), which is what the memory budget counts (80 B per point + 512 MiB,
docs/performance.md), and the **total** RSS, which also counts file-backed pages mapped
into the process: X's chunk maps, which a store that fits in memory holds across passes
(storage/base.py). Those pages are the page cache, which the kernel reclaims under
pressure; they are not the process's own memory.

getrusage's ru_maxrss is not enough on Linux: a process started by fork + exec keeps
its parent's peak from before the exec (a test runner that has grown to 500 MB gives
every child a 500 MB "peak"). The kernel's own high-water mark, VmHWM, starts afresh at
exec and can be reset to the current RSS (``echo 5 > /proc/self/clear_refs``), so the
peak of exactly the measured work is VmHWM after it minus the RSS before it. The kernel
keeps no high-water mark of anonymous memory: :class:`PeakMemory` samples RssAnon from a
thread (every millisecond by default; an allocation that lives for less may be missed, so the
sampled peak is a lower bound, as the total's VmHWM is an upper bound of it).
"""

import resource
import threading


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


def anonymous_rss():
    """This process's resident anonymous memory now (RssAnon, bytes): RSS without the
    file-backed pages (the page cache) and shared memory."""
    return _status("RssAnon")


class PeakMemory:
    """``with PeakMemory() as peak: work()`` (or ``start()`` ... ``stop()``), then
    ``peak.anonymous`` and ``peak.total``: the peak increase of the anonymous memory
    (sampled every ``interval`` seconds: a timed benchmark takes 0.01, whose reads of /proc
    then cost it under 1% of a core) and of the RSS (VmHWM) over the work, in bytes, from
    their values at the start. Read inside the block, they are the peaks so far."""

    def __init__(self, interval=0.001):
        self.interval = interval
        self._stop = threading.Event()
        self._final = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        """Start measuring (what ``with`` does); returns self."""
        self._rss0 = start_peak_measurement()
        self._anon0 = self._anon_peak = anonymous_rss()
        self._sampler = threading.Thread(target=self._sample, name="peak-memory", daemon=True)
        self._sampler.start()
        return self

    def _sample(self):
        while not self._stop.wait(self.interval):
            self._anon_peak = max(self._anon_peak, anonymous_rss())

    def stop(self):
        """Stop measuring: ``anonymous`` and ``total`` keep their values from now on."""
        self._stop.set()
        self._sampler.join()
        self._final = (self.anonymous, self.total)

    @property
    def anonymous(self):
        if self._final is not None:
            return self._final[0]
        self._anon_peak = max(self._anon_peak, anonymous_rss())
        return self._anon_peak - self._anon0

    @property
    def total(self):
        return self._final[1] if self._final is not None else peak_rss() - self._rss0

    def as_dict(self):
        """{"anonymous": bytes, "total": bytes}: what results files record."""
        return {"anonymous": self.anonymous, "total": self.total}
