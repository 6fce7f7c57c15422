"""A candidate hook used by test_checks.py (imported inside the candidate child by path)."""

from __future__ import annotations

from drkernel.gym.candidate.launches import LaunchRecorder


class PassthroughProbe(LaunchRecorder):
    """Re-runs trial 0 with the solution's own launches skipped and has the judge compare."""

    name = "passthrough_probe"

    def extra_runs(self, ctx, model, make_inputs):
        import torch

        with self.skipping_own(), torch.no_grad():
            out = model(*make_inputs(0))
        return {"skip_own": ctx.compare(out, 0, "skip_own")}
