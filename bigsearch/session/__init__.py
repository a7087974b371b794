"""Sessions: interactive Active Search that survives crashes, restarts and mistakes.

Layout: ``journal`` (the append-only label journal), ``checkpoint`` (engine states on
disk), ``lock`` (one writer at a time), ``fingerprint`` (refusing a changed store),
``files`` (durable writes) and ``session`` (the :class:`Session` that ties them together
between the engine and the CLI). The on-disk format is described in docs/sessions.md.
"""

from .session import Session

__all__ = ["Session"]
