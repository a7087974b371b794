"""What a session says about itself: its status, and the estimates of positives left
(engine/guidance/remaining.py) with the random sample drawn for them."""

from __future__ import annotations

import json
import numbers
import os
from typing import Any

import numpy as np

from ..errors import BigsearchError, LabelError, ParameterError
from ..storage.atomic import atomic_write_json
from .files import PRIVATE_FILE
from .journal import now

SAMPLE = "sample.json"  # a random sample for the estimate of positives left (engine/guidance/remaining.py)


class SessionStatus:
    """The status and estimates of :class:`~bigsearch.session.Session` (mixed into it)."""

    def status(self, estimate: bool = True) -> dict[str, Any]:
        """A JSON-able summary: labels, positives found, hits by step, checkpoint, and
        (``estimate``) the estimate of positives remaining, :meth:`remaining`."""
        labels = [int(y >= 0.5) for _, y in self.history]  # a graded label y counts as positive from 0.5
        graded = sum(y not in (0, 1) for _, y in self.history)
        newest = next((body for _, body, _ in self._manifests if body and self._holds_prefix(body)), None)
        return {
            "directory": str(self.directory),
            "method": self.method,
            "params": self.info["params"],
            "store": self._store_path(),
            "n": self.info["store"]["fingerprint"]["n"],
            "r": self.info["store"]["fingerprint"]["r"],
            "created": self.info["created"],
            "labels": len(labels),
            "positives": int(sum(labels)),
            "negatives": len(labels) - int(sum(labels)),
            "graded": graded,
            "undone": self._history.undone,
            "corrections": [dict(c) for c in self._history.corrections],
            "journal_records": self._history.last_seq,
            "skipped": self._history.skipped,
            "hits": np.cumsum(labels, dtype=np.int64).tolist(),
            "checkpoint": None
            if newest is None
            else {"labels": newest["history"]["labels"], "journal_record": newest["seq"], "created": newest["created"]},
            "checkpoint_every": self.info["checkpoint_every"],
            "remaining": self.remaining() if estimate else None,
        }

    def remaining(self) -> dict[str, Any]:
        """Positives left unlabeled and the recent hit rate, with their uncertainty
        (engine/guidance/remaining.py; docs/sessions.md says how far to trust each). One pass
        over X when the engine is not loaded yet, and none otherwise: on a session with
        pruned queries, whose f is current only where the queries read, the score sum
        is left out (``score_sum`` None, ``score_sum_left_out`` says why) rather than
        paid for with a pass; an unreadable store gives {"error"}."""
        from ..engine.guidance.remaining import remaining_summary

        try:
            search = self.search
            costly = search.f_costs_a_pass()
            f = search.f if search.PROBABILITY_SCORES and not costly else None
            out = remaining_summary(f, search.labels, np.array([y for _, y in self.history], np.float64))
        except BigsearchError as e:
            return {"error": str(e)}
        if search.PROBABILITY_SCORES and costly:
            out["score_sum_left_out"] = (
                "the session's queries are pruned: f of the rows they did not read "
                "is not current, and bringing it up to date costs a pass over X"
            )
        out["sample"] = self._sample_estimate()
        out["recall"] = self.recall()
        return out

    def recall(self) -> dict[str, Any]:
        """The recall reached so far with its 95% interval, from the order of the answers
        (engine/guidance/stopping.py), or from the random sample when one is answered
        (calibrated by construction); with the session's target (``stop_at_recall``),
        whether the stopping rule is met: the interval's lower end at the target."""
        from ..engine.guidance.seeding import labels_told
        from ..engine.guidance.stopping import recall_estimate, stop_reached

        answers = np.array([y for _, y in self.history], np.float64)
        n = self.info["store"]["fingerprint"]["n"]
        given = labels_told(self.info.get("start"))  # the start's labels: not the search's pace
        estimate = recall_estimate(answers, n, given=given)
        found = int(np.sum(answers >= 0.5))
        out: dict[str, Any] = {"basis": "order", **estimate.as_dict()}
        sample = self._sample_estimate()
        if sample and sample.get("estimate") and found:
            left = sample["estimate"]
            out = {
                "basis": "sample",
                "found": found,
                "read": len(answers),
                "remaining": left["value"],
                "remaining_high": left["high"],
                "remaining_low": left["low"],
                "recall": found / (found + left["value"]),
                "recall_low": found / (found + left["high"]),
                "recall_high": found / (found + left["low"]),
                "level": left["level"],
                "window": 0,
            }
        target = self.info.get("stop_at_recall")
        out["target"] = target
        if target is not None:
            out["stop"] = (
                bool(found and out["recall_low"] >= target)
                if out["basis"] == "sample"
                else stop_reached(estimate, target)
            )
        return {k: (None if isinstance(v, float) and v != v else v) for k, v in out.items()}

    def draw_sample(self, m: int, seed: int | None = None) -> list[int]:
        """Draw ``m`` unlabeled points uniformly at random (without replacement) for the
        estimate of positives left: label them as any other, and :meth:`remaining` (and
        `session status`) estimates the count from their answers, with a confidence
        interval. Replaces an earlier sample. Returns the points, in row order."""
        self._require_writer("draw a sample")
        if isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 1:
            raise ParameterError(f"the sample size must be a positive integer, got {m!r}")
        labeled = np.zeros(self.info["store"]["fingerprint"]["n"], bool)
        labeled[[i for i, _ in self.history]] = True
        pool = np.flatnonzero(~labeled)
        if not len(pool):
            raise LabelError("every point is labeled: nothing remains to estimate")
        pick = np.sort(np.random.default_rng(seed).choice(pool, size=min(int(m), len(pool)), replace=False))
        atomic_write_json(
            self.directory / SAMPLE,
            {
                "indices": pick.tolist(),
                "population": int(len(pool)),
                "seed": seed,
                "created": now(),
                "positives": int(sum(y >= 0.5 for _, y in self.history)),
            },
        )
        os.chmod(self.directory / SAMPLE, PRIVATE_FILE)  # the owner's only, as the session (files.py)
        return pick.tolist()

    def _sample_estimate(self):
        """The sampled estimate, with how much of the sample is answered (None: no sample)."""
        from ..engine.guidance.remaining import sampled_remaining

        try:
            sample = json.loads((self.directory / SAMPLE).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            return {"error": f"{self.directory / SAMPLE} is damaged ({e})"}
        labeled = dict(self.history)
        answers = [labeled[i] for i in sample["indices"] if i in labeled]
        out = {"drawn": len(sample["indices"]), "answered": len(answers), "estimate": None}
        if answers:
            found_since = int(sum(y >= 0.5 for _, y in self.history)) - sample["positives"]
            out["estimate"] = sampled_remaining(
                sample["population"], np.array(answers, np.float64), found_since
            ).as_dict()
        return out
