"""Where the per-block work of ingest runs: in this process, or on a dask cluster.

Inputs are read once, in order, and the store is written by one writer, both here. The
work per block that can be heavy, the statistics of pass 1 and the featurization of
pass 2 (encoding, normalization, random Fourier features), can run on the workers of a
dask cluster instead: blocks travel without their reader (open files stay here), at most
two per worker are in flight, and results come back in input order. A block that fails
on a worker is redone here, so a bad value is reported with its file and line exactly
as without a cluster, and a lost worker costs only that block's time.
"""

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace


def block_mapper(backend):
    """The mapper for an engine backend: "local", or a dask backend spec with ``.client``."""
    client = getattr(backend, "client", None)
    return ClusterMapper(client) if client is not None else LocalMapper()


class LocalMapper:
    remote = redone = 0
    remote_capable = False      # every block is featurized in this process

    def imap(self, fn, tagged_blocks, *shared, ahead=0):
        """Yield (tag, block, fn(block, *shared)) for each (tag, block), in order. With
        ``ahead``, fn runs on that many threads for the blocks after the one yielded, so
        featurizing the next blocks overlaps with what the caller does with this one
        (writing it), with reading, and one block's fingerprints (worker processes) with
        another's map (numba): the heavy parts release Python's lock. Each block ahead
        holds its features in memory."""
        if not ahead:
            for tag, block in tagged_blocks:
                yield tag, block, fn(block, *shared)
            return
        with ThreadPoolExecutor(ahead, thread_name_prefix="ingest-block") as pool:
            pending = deque()
            for tag, block in tagged_blocks:
                pending.append((tag, block, pool.submit(fn, block, *shared)))
                if len(pending) > ahead:
                    tag, block, future = pending.popleft()
                    yield tag, block, future.result()
            while pending:
                tag, block, future = pending.popleft()
                yield tag, block, future.result()


class ClusterMapper:
    remote_capable = True

    def __init__(self, client, per_worker=2):
        self.client = client
        self.window = per_worker * max(1, len(client.scheduler_info()["workers"]))
        self.remote = self.redone = 0      # blocks done by workers, and redone here

    def imap(self, fn, tagged_blocks, *shared, ahead=0):
        """As LocalMapper.imap, with fn running on the cluster's workers (``per_worker``
        blocks each in flight, whatever ``ahead``)."""
        remote = [self.client.scatter([value], broadcast=True)[0] for value in shared]
        pending = deque()
        for tag, block in tagged_blocks:
            future = self.client.submit(fn, replace(block, reader=None), *remote, pure=False)
            pending.append((tag, block, future))
            if len(pending) >= self.window:
                yield self._result(fn, shared, *pending.popleft())
        while pending:
            yield self._result(fn, shared, *pending.popleft())

    def _result(self, fn, shared, tag, block, future):
        try:
            result = future.result()
        except Exception:
            self.redone += 1
            return tag, block, fn(block, *shared)   # here: raises with the file and line, if bad
        self.remote += 1
        return tag, block, result
