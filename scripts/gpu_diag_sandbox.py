"""Which wall stops CUDA in a sandboxed candidate: the gold ReLU on the GPU under each combination
of zygote and seccomp filter (and, run as an unprivileged user, without the root identity switch).
`PYTHONPATH=src:tests/gym python scripts/gpu_diag_sandbox.py [--device cuda:0]`."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gym"))

from drkernel.gym import InProcessEvaluator  # noqa: E402
from gym_cases import RELU_SOLUTION, request  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    print("uid", os.getuid(), "nodes", sorted((n, oct(os.stat(f"/dev/{n}").st_mode & 0o777), os.stat(f"/dev/{n}").st_gid)
                                         for n in os.listdir("/dev") if n.startswith("nvidia")))
    bad = 0
    for zygote in (True, False):
        for seccomp in (True, False):
            t0 = time.monotonic()
            with InProcessEvaluator(device=args.device, concurrency=1, pool_size=1, zygote=zygote,
                                    seccomp=seccomp) as ev:
                r = ev.evaluate(request(RELU_SOLUTION, device=args.device))
                info = ev.device_info()
            ok = r.status.value == "correct"
            bad += not ok
            print(f"DIAG zygote={zygote} seccomp={seccomp}: {r.status.value} zygote_up={info.get('zygote')} "
                  f"({time.monotonic() - t0:.1f} s)\n  error: {(r.error or '')[-1500:]}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
