"""One error hierarchy for bigsearch.

Every error a user can cause derives from :class:`BigsearchError`; subclasses also
inherit the matching built-in, so callers can catch what they expect (a missing
store is also a ``FileNotFoundError``, a bad label also a ``ValueError``). The CLI
turns any ``BigsearchError`` into a one-line message and exit status 2.
"""


class BigsearchError(Exception):
    """Base class of the errors bigsearch raises on bad input or bad state."""


class StoreError(BigsearchError, ValueError):
    """A feature store is malformed or cannot be used as it is."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """The path does not hold a feature store."""


class StoreExistsError(StoreError, FileExistsError):
    """The output path already exists and overwriting was not asked for."""


class ObjectStoreError(StoreError):
    """An object store cannot be used: no credentials, unreachable, no such bucket, denied."""


class DataError(BigsearchError, ValueError):
    """The numbers in X cannot be used (non-finite values, degrees <= 0)."""


class LabelError(BigsearchError, ValueError):
    """A label or an index given to ``tell`` is not acceptable."""


class ParameterError(BigsearchError, ValueError):
    """A parameter is out of its valid range."""


class NumericalError(BigsearchError, ArithmeticError):
    """An update would break the numerics (for example a Sherman-Morrison
    denominator that is not finite and positive)."""


class ResourceError(BigsearchError, MemoryError):
    """The requested computation does not fit this machine."""


class SessionError(BigsearchError):
    """A session directory cannot be used as asked."""


class SessionNotFoundError(SessionError, FileNotFoundError):
    """The directory does not hold a session."""


class SessionExistsError(SessionError, FileExistsError):
    """A session (or other files) already exists where a new one was to be created."""


class SessionLockedError(SessionError):
    """Another live process has the session open for writing."""


class SessionCorruptError(SessionError):
    """A session's files are damaged beyond what it can recover from by itself."""


class SessionFormatError(SessionError):
    """A session was written by a newer bigsearch."""


class SessionWarning(UserWarning):
    """Something was recovered on opening a session (a damaged checkpoint skipped, a
    torn journal line dropped, a stale lock taken over)."""


class InputError(BigsearchError, ValueError):
    """An input of `bigsearch ingest` cannot be read: unknown format, malformed or unreadable
    content, or a value that cannot become a feature. The message names the file and line or row."""


class ClusterError(BigsearchError, RuntimeError):
    """A dask cluster cannot run the search: no scheduler at the address, no workers,
    or workers that cannot open the feature store."""


class ExperimentError(BigsearchError, ValueError):
    """An experiment directory cannot be used as asked (it holds a different experiment)."""


class ExperimentExistsError(ExperimentError, FileExistsError):
    """The output directory already holds results of a different experiment."""


class DatasetError(BigsearchError):
    """A public data set cannot be fetched or found (bigsearch/datasets.py)."""
