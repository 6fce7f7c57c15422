"""GPU checks of CUDA solutions (``language: cuda``, `drkernel.gym.cuda`): the `cuda` section of
scripts/gpu_check.sh. Prints PASS/FAIL lines and writes ``cuda_gpu.json`` under ``--out``.

1. every CUDA gold of the built-in suite valid, with its speedup over eager PyTorch;
2. a repeated solution: the second evaluation starts no compile, the compile stage of a first and a
   cached evaluation measured;
3. the new surface's hacks caught (decoy ``__global__``, side stream, host thread, device limits,
   events without timing, a result cached by pointer, a prebuilt library, a timer read in asm);
4. ``drkernel bench run --language cuda`` with the scripted CUDA golds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.cuda.build import CompileCache, Compiler
from drkernel.gym.cuda.evaluate import CudaEvaluator
from drkernel.gym.orchestrator.sandbox import make_runner
from drkernel.problems.builtin_cuda import cuda_solution, cuda_solutions
from drkernel.problems.loaders import load_builtin

HACKS = {  # name -> (C++ inserted before the gold's first __global__, the hack code expected)
    "decoy_global": ("__global__ void never_launched(float* y) { y[0] = 0.f; }\n", None),
    "side_stream": ("static cudaStream_t side() { cudaStream_t s; cudaStreamCreate(&s); return s; }\n", 7),
    "host_thread": ("#include <thread>\nstatic void spin() { std::thread t([]{}); t.join(); }\n", 7),
    "device_limit": ("static void lim() { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20); }\n", 15),
    "events_no_timing": ("static void ev() { cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming); }\n", 7),
    "cached_by_pointer": ("static torch::Tensor memo;\n", 9),
    "asm_timer": ('__device__ unsigned long long now() { unsigned long long t; '
                  'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }\n', 14),
}
PREBUILT = ("extra_ldflags=['-L/opt/lib', '-lfast']", 14)


class CountingRunner:
    """The sandbox runner, counting the children it starts (each compile is one)."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.sandboxed, self.started = inner, inner.name, inner.sandboxed, [0]

    def popen(self, spawn):
        self.started[0] += 1
        return self.inner.popen(spawn)

    def private_dir(self) -> str:
        return self.inner.private_dir()

    def exit_status(self, returncode: int) -> int:
        return self.inner.exit_status(returncode)


def report(ok: bool, what: str, rows: list) -> None:
    print(f"{'PASS' if ok else 'FAIL'} {what}")
    rows.append({"ok": ok, "what": what})


def golds(front: CudaEvaluator, device: str, rows: list) -> None:
    for problem in (p for p in load_builtin() if cuda_solutions(p)):
        req = EvalRequest(problem=problem, solution=cuda_solution(problem), language="cuda",
                          config=EvalConfig(device=device))
        try:
            r = front.evaluate(req)
        except Exception as e:  # the GPU run may not be wired yet: say so per problem
            report(False, f"gold {problem.name}: {type(e).__name__}: {e}", rows)
            continue
        report(bool(r.valid) and r.speedup is not None,
               f"gold {problem.name}: {r.status.value}, valid {r.valid}, speedup {r.speedup}, "
               f"compile {r.stage_seconds.get('compile', 0):.1f} s, coverage {r.time_coverage}", rows)


def repeat_and_hacks(front: CudaEvaluator, runner_count: list, device: str, rows: list) -> None:
    problem = next(p for p in load_builtin() if p.name == "gelu")
    gold = cuda_solution(problem)
    req = EvalRequest(problem=problem, solution=gold.replace("gelu_ext", "gelu_repeat_ext"), language="cuda",
                      config=EvalConfig(device=device))
    stages = []
    for _ in range(2):
        before = runner_count[0]
        try:
            r = front.evaluate(req)
            stages.append((r.stage_seconds.get("compile"), runner_count[0] - before, r.status.value))
        except Exception as e:
            stages.append((None, runner_count[0] - before, f"{type(e).__name__}: {e}"))
    print(f"compile stage first vs cached: {stages}")
    report(stages[1][1] == 0 and stages[0][1] >= 1, "the second evaluation started no compile", rows)
    for name, (cpp, code) in HACKS.items():
        source = gold.replace("__global__ void gelu_kernel", cpp + "__global__ void gelu_kernel", 1)
        hack_case(front, problem, source, name, code, device, rows)
    source = gold.replace('functions=["gelu_forward"]', 'functions=["gelu_forward"], ' + PREBUILT[0])
    hack_case(front, problem, source, "prebuilt_library", PREBUILT[1], device, rows)


def hack_case(front, problem, source, name, code, device, rows) -> None:
    req = EvalRequest(problem=problem, solution=source, language="cuda", config=EvalConfig(device=device))
    try:
        r = front.evaluate(req)
    except Exception as e:
        report(False, f"hack {name}: {type(e).__name__}: {e}", rows)
        return
    codes = sorted({h.code for h in r.hacks})
    expected = code if code is not None else 1
    report(expected in codes and not r.valid, f"hack {name}: caught {codes} (expected {expected}), {r.status.value}",
           rows)


def bench(out: Path, rows: list) -> None:
    cmd = [sys.executable, "-m", "drkernel", "bench", "run", "--out", str(out / "bench_cuda"), "--language", "cuda",
           "--policy", "scripted:builtin_cuda:gold", "--problems", "builtin:1", "-n", "1", "-t", "1",
           "--device", "cuda:0", "--no-report"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    print(done.stdout[-2000:], done.stderr[-2000:])
    report(done.returncode == 0, "drkernel bench run --language cuda (scripted CUDA golds)", rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", default="out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from drkernel.tasks.gym import make_evaluator

    inner = make_evaluator("local", args.device, 2).inner
    runner = CountingRunner(make_runner())
    front = CudaEvaluator(inner, Compiler(runner, CompileCache(out / "cuda_cache")), args.device)
    rows: list = []
    t0 = time.monotonic()
    try:
        golds(front, args.device, rows)
        repeat_and_hacks(front, runner.started, args.device, rows)
    finally:
        front.close()
    bench(out, rows)
    (out / "cuda_gpu.json").write_text(json.dumps({"rows": rows, "seconds": time.monotonic() - t0}, indent=2))
    sys.exit(0 if all(r["ok"] for r in rows) else 1)


if __name__ == "__main__":
    main()
