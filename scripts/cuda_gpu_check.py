"""GPU checks of CUDA solutions (``language: cuda``, `drkernel.gym.cuda`): the ``cuda`` section of
scripts/gpu_check.sh. One PASS/FAIL line per check, the seconds of each phase, ``cuda_gpu.json``
under ``--out``; exit status 1 when any check failed.

    builds    every CUDA gold (and the run-time hack below) compiled side by side in the sandbox, first
              time (a cache of this run's own: ``<out>/xdg/drkernel/cuda``)
    golds     every CUDA gold evaluated through the in-process gym: valid, a speedup and time coverage
              measured, no compile in the evaluation (its build is cached)
    repeat    one solution evaluated twice: the first starts a compile child, the second none; the
              ``compile`` stage of both printed (first vs cached)
    hacks     the new surface: refused from the source (side stream, host thread, device limit, events
              without timing, a static tensor cache, a timer read in asm, a prebuilt library) and at run
              time (a decoy ``__global__`` never launched, ATen doing the work: hack 1); no "Triton"
              in a CUDA result's messages
    bench     ``drkernel bench run --language cuda`` with the scripted CUDA golds on the first problems
              of the built-in level 1, reusing this run's builds

On a GPU host (16 cores) the builds take about 1.5 minutes and the whole run about 5. ``--device cpu``
is the dry run: the same checks with CPU's verdicts (``unsupported_on_cpu`` after a build, the source
refusals, the run-time hack reported as GPU-only); ``--golds 1`` keeps it to a few builds (each is a
minute of CPU). ``--budget-s`` stops starting new phases once spent (those report FAIL).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.cuda.build import CompileCache, Compiler
from drkernel.gym.cuda.contract import check_cuda
from drkernel.gym.cuda.evaluate import CudaEvaluator
from drkernel.gym.orchestrator.sandbox import make_runner
from drkernel.gym.result import EvalResult, Status
from drkernel.problems.builtin_cuda import cuda_solution, cuda_solutions
from drkernel.problems.loaders import load_builtin, load_problems

LAUNCH = "    gelu_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);\n    return y;"
STATIC_HACKS = {  # name -> (C++ inserted before the gelu gold's kernel, the hack code expected)
    "side_stream": ("static cudaStream_t side() { cudaStream_t s; cudaStreamCreate(&s); return s; }\n", 7),
    "host_thread": ("#include <thread>\nstatic void spin() { std::thread t([]{}); t.join(); }\n", 7),
    "device_limit": ("static void lim() { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20); }\n", 15),
    "events_no_timing": ("static void ev() { cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming); }\n",
                         7),
    "cached_by_pointer": ("static torch::Tensor memo;\n", 9),
    "asm_timer": ('__device__ unsigned long long now() { unsigned long long t; '
                  'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }\n', 14),
}
PREBUILT = ("extra_ldflags=['-L/opt/lib', '-lfast']", 14)
BENCH_PROBLEMS = 4  # the first built-in level-1 problems: gelu and silu have CUDA golds, two answered without code


class CountingRunner:
    """The sandbox runner, counting the children it starts (each compile is one)."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.sandboxed, self.started = inner, inner.name, inner.sandboxed, 0

    def popen(self, spawn):
        self.started += 1
        return self.inner.popen(spawn)

    def private_dir(self) -> str:
        return self.inner.private_dir()

    def exit_status(self, returncode: int) -> int:
        return self.inner.exit_status(returncode)


class Checks:
    """PASS/FAIL lines, phase seconds and the budget."""

    def __init__(self, budget_s: float) -> None:
        self.rows: list[dict] = []
        self.phases: dict[str, float] = {}
        self.t0, self.budget_s = time.monotonic(), budget_s

    def report(self, ok: bool, what: str, **data) -> None:
        print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)
        self.rows.append({"ok": ok, "what": what, **data})

    def phase(self, name: str, fn, *args) -> None:
        spent = time.monotonic() - self.t0
        if spent > self.budget_s:
            self.report(False, f"{name}: not run, the budget of {self.budget_s:.0f} s is spent ({spent:.0f} s)")
            return
        t = time.monotonic()
        try:
            fn(self, *args)
        except Exception as e:  # a broken phase is a FAIL line, and the next phase still runs
            self.report(False, f"{name}: {type(e).__name__}: {str(e)[:400]}")
        self.phases[name] = round(time.monotonic() - t, 1)
        print(f"--- {name}: {self.phases[name]:.1f} s (total {time.monotonic() - self.t0:.0f} s)", flush=True)


def request(problem, source: str, device: str) -> EvalRequest:
    return EvalRequest(problem=problem, solution=source, language="cuda", config=EvalConfig(device=device))


def no_triton(r: EvalResult) -> bool:
    return not any("triton" in (h.message + h.evidence).lower() for h in r.hacks) and r.language == "cuda"


def decoy_source(gold: str) -> str:
    """The gelu gold with its launch replaced by ATen's gelu: its __global__ is never launched."""
    assert LAUNCH in gold, "the gelu gold's launch line changed"
    return gold.replace(LAUNCH, "    return at::gelu(xc);")


def builds(checks: Checks, front: CudaEvaluator, sources: dict[str, str]) -> None:
    modules = [(name, m) for name, src in sources.items() for m in check_cuda(src).modules]
    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(modules)) as pool:
        outcomes = list(pool.map(lambda nm: front.compiler.build(nm[1]), modules))
    wall = time.monotonic() - t
    for (name, _), o in zip(modules, outcomes):
        what = f"build {name}: {'cached' if o.cached else f'compiled in {o.seconds:.1f} s'}, linked {o.linked}"
        checks.report(o.ok, what + ("" if o.ok else f": {(o.error or '')[:300]}"), seconds=o.seconds,
                      cached=o.cached)
    print(f"{len(modules)} builds in {wall:.1f} s of wall time ({os.cpu_count()} cores: up to half as many builds "
          f"at once)")


def golds(checks: Checks, front: CudaEvaluator, problems: list, device: str) -> None:
    reqs = [request(p, cuda_solution(p), device) for p in problems]
    results = asyncio.run(front.evaluate_batch(reqs))
    for p, r in zip(problems, results):
        compile_s = r.stage_seconds.get("compile", 0.0)
        if device == "cpu":
            ok = r.status is Status.UNSUPPORTED_ON_CPU and r.compiled is True
        else:
            ok = bool(r.valid) and r.speedup is not None and r.time_coverage is not None and no_triton(r)
        checks.report(ok, f"gold {p.name}: {r.status.value}, valid {r.valid}, speedup {r.speedup}, time coverage "
                          f"{r.time_coverage}, op coverage {r.op_coverage}, compile stage {compile_s:.2f} s, "
                          f"hacks {[(h.code, h.evidence[:80]) for h in r.hacks]}, error {(r.error or '')[:200]!r}",
                      speedup=r.speedup, time_coverage=r.time_coverage, stages=r.stage_seconds)


def repeat(checks: Checks, front: CudaEvaluator, runner: CountingRunner, problem, device: str) -> None:
    name = f"gelu_repeat_{uuid.uuid4().hex[:8]}"  # a source no cache has seen: the first evaluation compiles
    req = request(problem, cuda_solution(problem).replace("gelu_ext", name), device)
    seen = []
    for _ in range(2):
        before = runner.started
        r = front.evaluate(req)
        seen.append((r, runner.started - before, r.stage_seconds.get("compile", 0.0)))
    (first, started1, c1), (second, started2, c2) = seen
    print(f"compile stage: first {c1:.1f} s ({started1} compile children), cached {c2:.3f} s ({started2})")
    checks.report(started1 >= 1 and started2 == 0 and c2 < 1.0, f"the second evaluation compiled nothing "
                  f"(compile stage first {c1:.1f} s vs cached {c2:.3f} s)", first_s=c1, cached_s=c2)
    same = second.status is first.status and (device == "cpu" or bool(second.valid))
    checks.report(same, f"the repeat's verdict: {first.status.value} then {second.status.value}, valid {second.valid}")


def hacks(checks: Checks, front: CudaEvaluator, problem, device: str) -> None:
    gold = cuda_solution(problem)
    cases = {name: (gold.replace("__global__ void gelu_kernel", cpp + "__global__ void gelu_kernel", 1), code)
             for name, (cpp, code) in STATIC_HACKS.items()}
    cases["prebuilt_library"] = (gold.replace('functions=["gelu_forward"]',
                                              'functions=["gelu_forward"], ' + PREBUILT[0]), PREBUILT[1])
    for name, (source, code) in cases.items():
        r = front.evaluate(request(problem, source, device))
        codes = sorted({h.code for h in r.hacks})
        checks.report(code in codes and r.status is Status.REJECTED and no_triton(r),
                      f"hack {name}: caught {codes} (expected {code}), {r.status.value}, from the source")
    r = front.evaluate(request(problem, decoy_source(gold), device))
    codes = sorted({h.code for h in r.hacks})
    if device == "cpu":
        checks.report(r.status is Status.UNSUPPORTED_ON_CPU, f"hack decoy_global (ATen does the work): "
                      f"{r.status.value} on CPU; caught only on a GPU")
        return
    checks.report(1 in codes and not r.valid and no_triton(r), f"hack decoy_global (ATen does the work): caught "
                  f"{codes} (expected 1), {r.status.value}, {[h.evidence[:100] for h in r.hacks]}")


def bench(checks: Checks, out: Path, device: str, remaining_s: float) -> None:
    run = out / "bench_cuda"
    cmd = [sys.executable, "-m", "drkernel", "bench", "run", "--out", str(run), "--language", "cuda",
           "--policy", "scripted:builtin_cuda:gold", "--problems", "builtin:1", "--limit", str(BENCH_PROBLEMS),
           "-n", "1", "-t", "1", "--device", device, "--no-report"]
    env = {**os.environ, "XDG_CACHE_HOME": str(out / "xdg")}  # this run's builds: the golds compile no more
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=max(60.0, remaining_s))
    print(done.stdout[-1500:], done.stderr[-1500:])
    golds_there = [p for p in load_problems("builtin:1")[:BENCH_PROBLEMS] if cuda_solutions(p)]
    metrics = json.loads((run / "metrics.json").read_text()) if (run / "metrics.json").exists() else {}
    valid = len(metrics.get("speedups") or [])
    ok = done.returncode == 0 and (valid == len(golds_there) if device != "cpu" else bool(metrics))
    checks.report(ok, f"drkernel bench run --language cuda: rc {done.returncode}, {metrics.get('samples')} samples, "
                      f"{valid} valid with speedups {metrics.get('speedups')} (golds among them: "
                      f"{[p.name for p in golds_there]})")


def toolchain_line() -> str:
    """nvcc's release and torch's CUDA: an extension links the toolkit's libcudart beside torch's."""
    import torch

    try:
        nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=30).stdout
        release = next((line.strip() for line in nvcc.splitlines() if "release" in line), "nvcc: no release line")
    except (OSError, subprocess.TimeoutExpired) as e:
        release = f"nvcc: {e}"
    return f"toolchain: {release}; torch {torch.__version__} built with CUDA {torch.version.cuda}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0", help="cuda:N, or cpu for the dry run")
    ap.add_argument("--out", default="out")
    ap.add_argument("--golds", type=int, default=0, help="only the first N CUDA golds (0: all)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="no phase starts after this many seconds")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    from drkernel.gym import InProcessEvaluator

    problems = [p for p in load_builtin() if cuda_solutions(p)][:args.golds or None]
    gelu = next(p for p in load_builtin() if p.name == "gelu")
    runner = CountingRunner(make_runner())
    inner = InProcessEvaluator(device=args.device, concurrency=4, pool_size=4)
    front = CudaEvaluator(inner, Compiler(runner, CompileCache(out / "xdg" / "drkernel" / "cuda")), args.device)
    checks = Checks(args.budget_s)
    print(toolchain_line(), flush=True)
    sources = {p.name: cuda_solution(p) for p in problems} | {"decoy_global": decoy_source(cuda_solution(gelu))}
    try:
        checks.phase("builds", builds, front, sources)
        checks.phase("golds", golds, front, problems, args.device)
        checks.phase("repeat", repeat, front, runner, gelu, args.device)
        checks.phase("hacks", hacks, front, gelu, args.device)
    finally:
        front.close()
    checks.phase("bench", bench, out, args.device, args.budget_s + 120 - (time.monotonic() - checks.t0))
    total = time.monotonic() - checks.t0
    failed = [r["what"] for r in checks.rows if not r["ok"]]
    print(f"cuda checks: {len(checks.rows) - len(failed)} passed, {len(failed)} failed, {total:.0f} s in all "
          f"(phases {checks.phases})")
    (out / "cuda_gpu.json").write_text(json.dumps({"device": args.device, "rows": checks.rows,
                                                   "phases": checks.phases, "seconds": total}, indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
