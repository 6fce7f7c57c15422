"""Candidate hooks used by test_checks.py and test_compile_cache.py (imported inside the candidate child by path)."""

from __future__ import annotations

from drkernel.gym.candidate.launches import LaunchRecorder
from drkernel.gym.checks import HookBase


class PassthroughProbe(LaunchRecorder):
    """Re-runs trial 0 with the solution's own launches skipped and has the judge compare."""

    name = "passthrough_probe"

    def extra_runs(self, ctx, model, make_inputs):
        import torch

        with self.skipping_own(), torch.no_grad():
            out = model(*make_inputs(0))
        return {"skip_own": ctx.compare(out, 0, "skip_own")}


class CompileProbe(HookBase):
    """Stands for Triton compiling a kernel (the interpreter compiles nothing): before the import it
    writes ``probe/first.bin`` into the candidate's Triton cache, or ``probe/seen.bin`` when an earlier
    candidate's file was seeded there; and it plants what the cache must never keep (a link out, an
    odd name)."""

    name = "compile_probe"

    def before_import(self, ctx):
        import os

        root = os.environ["TRITON_CACHE_DIR"]
        os.makedirs(os.path.join(root, "probe"), exist_ok=True)
        seen = os.path.exists(os.path.join(root, "probe", "first.bin"))
        with open(os.path.join(root, "probe", "seen.bin" if seen else "first.bin"), "wb") as f:
            f.write(b"compiled")
        link = os.path.join(root, "probe", "link.bin")
        if not os.path.lexists(link):
            os.symlink("/etc/passwd", link)
        with open(os.path.join(root, "probe", "odd name!.bin"), "wb") as f:
            f.write(b"x")
