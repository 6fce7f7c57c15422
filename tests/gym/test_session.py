"""The orchestrator's side of one candidate (`drkernel.gym.orchestrator.session`): what it holds while the
candidate ends."""

from __future__ import annotations

import threading

from drkernel.gym import Status
from drkernel.gym.orchestrator.session import CandidateSession
from gym_cases import RELU_SOLUTION, request


def test_candidate_exit_and_judge_release_hold_the_device_lock(evaluator, monkeypatch):
    # A CUDA context torn down inside another candidate's timed region would land in its events, so
    # the exit runs while this session still holds the device: an exclusive request must wait for it.
    seen, writers = [], []
    finish = CandidateSession._finish

    def watched_finish(self, child):
        got_exclusive = threading.Event()
        writer = threading.Thread(target=lambda: (self.rt.rw.acquire_exclusive(), got_exclusive.set(),
                                                  self.rt.rw.release_exclusive()), daemon=True)
        writer.start()
        blocked = not got_exclusive.wait(0.3)
        seen.append((self.hold, blocked))
        writers.append((writer, got_exclusive))
        finish(self, child)

    monkeypatch.setattr(CandidateSession, "_finish", watched_finish)
    r = evaluator.evaluate(request(RELU_SOLUTION))
    assert r.status is Status.CORRECT
    assert seen == [("shared", True)]  # the exit ran under the shared hold, the writer waiting
    writer, got_exclusive = writers[0]
    writer.join(10)
    assert got_exclusive.is_set()  # and was let in once the session let go
    assert r.stage_seconds["child_exit"] > 0 and "judge_release" in r.stage_seconds
