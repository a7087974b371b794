"""The ask/tell interface shared by every search method.

``tell(index, label)`` records labels (the initial ones and every answer); the work
they cause is done lazily, when ``ask()`` or a score is next needed, so several labels
told together cost one pass over X. Labels are validated before anything changes.
"""

import numbers

import numpy as np

from ..errors import LabelError, ParameterError
from ..storage import open_store


class ActiveSearch:
    """Base class: label bookkeeping and the ask/tell protocol."""

    method = "?"

    def __init__(self, store, store_options=None):
        self.store = open_store(store, store_options)
        self.n = self.store.n
        self._label = np.full(self.n, -1, np.int8)
        self.history = []          # (index, label) in the order told
        self._pending = []         # told but not yet applied to the scores

    # -- the protocol ------------------------------------------------------------
    def tell(self, index, label):
        """Record the label (0 or 1) of a point, or of several: tell([i, j], [1, 0])."""
        indices, labels = self._validate(index, label)
        for i, y in zip(indices, labels):
            self._label[i] = y
            self.history.append((i, y))
            self._pending.append((i, y))

    def ask(self):
        """The index of the next point to label."""
        self._sync()
        if len(self.history) >= self.n:
            raise LabelError("every point is labeled; there is nothing left to ask")
        return self._choose()

    def sync(self):
        """Apply every label told so far now (the first call initializes): one pass over
        X for all pending labels. ``ask``, ``top`` and the scores call it themselves."""
        self._sync()

    def top(self, k=10):
        """The k unlabeled points with the highest selection scores, best first (the
        first is what ``ask()`` returns): (indices, scores) as NumPy arrays."""
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
            raise ParameterError(f"top(k) needs a whole number k >= 0, got {k!r}")
        self._sync()
        if k == 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        return self._top(int(k))

    def _choose(self):
        return int(self._top(1)[0][0])

    def _top(self, k):
        raise ParameterError(f"{self.method} search has no scores to rank points by; use ask()")

    # -- what subclasses provide -------------------------------------------------
    def _sync(self):
        """Bring the scores up to date with every label told so far."""
        raise NotImplementedError

    # -- shared helpers ----------------------------------------------------------
    @property
    def labels(self):
        """Per point: 1, 0, or -1 when not labeled (a read-only view)."""
        view = self._label.view()
        view.flags.writeable = False
        return view

    @property
    def n_labeled(self):
        return len(self.history)

    def _take_pending(self):
        pending, self._pending = self._pending, []
        idx = np.array([i for i, _ in pending], np.int64)
        lab = np.array([y for _, y in pending], np.int8)
        return idx, lab

    def _validate(self, index, label):
        scalar = np.ndim(index) == 0
        indices = [index] if scalar else list(index)
        labels = [label] if np.ndim(label) == 0 else list(label)
        if len(labels) != len(indices):
            raise LabelError(f"{len(indices)} indices but {len(labels)} labels")
        out_i, out_y, seen = [], [], set()
        for i, y in zip(indices, labels):
            if isinstance(i, (bool, np.bool_)) or not isinstance(i, numbers.Integral):
                raise LabelError(f"index {i!r} is not an integer")
            i = int(i)
            if not 0 <= i < self.n:
                raise LabelError(f"index {i} is out of range: the store has {self.n} points (0..{self.n - 1})")
            if self._label[i] >= 0 or i in seen:
                raise LabelError(f"point {i} is already labeled ({self._label[i] if self._label[i] >= 0 else 'twice in this call'})")
            if isinstance(y, (bool, np.bool_)):
                y = int(y)
            if not isinstance(y, numbers.Integral) or int(y) not in (0, 1):
                raise LabelError(f"label {y!r} for point {i} is not 0 (negative) or 1 (positive)")
            seen.add(i)
            out_i.append(i)
            out_y.append(int(y))
        return out_i, out_y

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<{type(self).__name__} on {self.store.path}: {self.n_labeled} labels>"
