"""Check and time the built-in suite's solutions at full size on a CUDA GPU.

Usage: python scripts/suite_gpu_bench.py --out bench.json [--labels gold] [--problems gelu,swiglu]

For every gold solution (plus the few lazy and slow ones in EXTRAS, unless --labels says otherwise)
it builds the reference and the solution with the same seed, checks two seeded input draws at
atol = rtol = 1e-2, then times eager PyTorch and the solution with CUDA events: warm-up calls, then
the median of --iters calls, each after an L2 flush. It prints a table and writes the rows as JSON.
Needs only torch and triton; it does not use drkernel.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import traceback
from pathlib import Path

import torch
import triton

SUITE_DIR = Path(__file__).resolve().parents[1] / "src" / "drkernel" / "problems" / "builtin"
DEVICE = "cuda"
ATOL = RTOL = 1e-2
MODEL_SEED = 0
TRIAL_SEEDS = (1, 2)
L2_FLUSH_BYTES = 256 * 1024 * 1024
# Non-gold solutions timed by default: a few lazy and slow ones, to see what the labels cost.
EXTRAS = (
    "level1/softmax/slow_three_pass.py",
    "level1/layernorm/lazy_torch_stats.py",
    "level2/gemm_bias_relu/lazy_torch_matmul.py",
    "level2/layernorm_gelu/slow_unfused.py",
    "level3/mlp/lazy_torch_linear.py",
)


def _import_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _flatten(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for item in out for t in _flatten(item)]


def _max_error(ref, sol) -> tuple[bool, float]:
    """(allclose at ATOL/RTOL with equal shapes and dtypes, max abs error)."""
    ref, sol = _flatten(ref), _flatten(sol)
    if len(ref) != len(sol):
        return False, float("inf")
    ok, worst = True, 0.0
    for r, s in zip(ref, sol):
        if r.shape != s.shape or r.dtype != s.dtype:
            return False, float("inf")
        ok &= bool(torch.allclose(s.double(), r.double(), atol=ATOL, rtol=RTOL))
        worst = max(worst, float((s.double() - r.double()).abs().max())) if r.numel() else worst
    return ok, worst


def _clone(inputs):
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def time_ms(fn, inputs, warmup: int, iters: int, flush: torch.Tensor) -> float:
    """Median milliseconds of fn(*inputs) over iters calls, each after an L2 flush."""
    with torch.no_grad():
        for _ in range(warmup):
            fn(*inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def bench_problem(problem_dir: Path, solutions: list[str], args, flush: torch.Tensor) -> list[dict]:
    meta = json.loads((problem_dir / "meta.json").read_text())
    name = f"{problem_dir.parent.name}/{problem_dir.name}"
    tag = name.replace("/", "_")
    ref_mod = _import_file(problem_dir / "reference.py", f"bench_ref_{tag}")
    with torch.device(DEVICE):
        init_inputs = ref_mod.get_init_inputs()
        torch.manual_seed(MODEL_SEED)
        ref_model = ref_mod.Model(*init_inputs)
        trials = []
        for seed in TRIAL_SEEDS:
            torch.manual_seed(seed)
            trials.append(ref_mod.get_inputs())
    with torch.no_grad():
        ref_outs = [ref_model(*_clone(inputs)) for inputs in trials]
    ref_ms = time_ms(ref_model, trials[0], args.warmup, args.iters, flush)

    rows = []
    for filename in solutions:
        row = {"problem": name, "level": meta["level"], "dtype": meta["dtype"], "solution": filename,
               "ref_ms": ref_ms, "sol_ms": None, "speedup": None, "correct": False, "max_abs_err": None,
               "error": None}
        model = None
        try:
            sol_mod = _import_file(problem_dir / filename, f"bench_sol_{tag}_{Path(filename).stem}")
            with torch.device(DEVICE):
                torch.manual_seed(MODEL_SEED)
                model = sol_mod.ModelNew(*init_inputs)
            worst, ok = 0.0, True
            for inputs, ref_out in zip(trials, ref_outs):
                with torch.no_grad():
                    trial_ok, err = _max_error(ref_out, model(*_clone(inputs)))
                ok, worst = ok and trial_ok, max(worst, err)
            row["correct"], row["max_abs_err"] = ok, worst
            row["sol_ms"] = time_ms(model, trials[0], args.warmup, args.iters, flush)
            row["speedup"] = ref_ms / row["sol_ms"]
        except Exception as exc:  # one failing solution must not stop the run
            row["error"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        del model
        rows.append(row)
    torch.cuda.empty_cache()
    return rows


def _selected(args) -> list[tuple[Path, list[str]]]:
    labels = set(args.labels.split(","))
    wanted = set(args.problems.split(",")) if args.problems else None
    plan = []
    for reference in sorted(SUITE_DIR.glob("level*/*/reference.py")):
        problem_dir = reference.parent
        if wanted and problem_dir.name not in wanted:
            continue
        names = sorted(p.name for p in problem_dir.glob("*.py") if p.stem.split("_", 1)[0] in labels)
        if args.extras:
            rel = f"{problem_dir.parent.name}/{problem_dir.name}/"
            names += [e[len(rel):] for e in EXTRAS if e.startswith(rel) and e[len(rel):] not in names]
        names.sort(key=lambda n: (n != "gold.py", n))
        if names:
            plan.append((problem_dir, names))
    return plan


def _print_table(rows: list[dict]) -> None:
    print(f"{'problem':<36} {'lvl':>3} {'solution':<28} {'ok':>3} {'ref ms':>9} {'sol ms':>9} {'speedup':>8}")
    for r in rows:
        sol = f"{r['sol_ms']:9.3f}" if r["sol_ms"] is not None else f"{'-':>9}"
        speed = f"{r['speedup']:8.2f}" if r["speedup"] is not None else f"{'-':>8}"
        ok = "yes" if r["correct"] else "NO"
        print(f"{r['problem']:<36} {r['level']:>3} {r['solution']:<28} {ok:>3} {r['ref_ms']:9.3f} {sol} {speed}")
    l2 = [r for r in rows if r["level"] == 2 and r["solution"] == "gold.py"]
    fast = sum(1 for r in l2 if r["correct"] and r["speedup"] and r["speedup"] >= 1.2)
    if l2:
        print(f"level-2 gold solutions correct and >= 1.2x faster than eager: {fast}/{len(l2)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="path of the JSON report")
    parser.add_argument("--labels", default="gold", help="comma-separated solution labels to run")
    parser.add_argument("--no-extras", dest="extras", action="store_false", help="skip the EXTRAS solutions")
    parser.add_argument("--problems", default="", help="comma-separated problem names (default: all)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--reference-tf32", choices=("default", "off", "on"), default="default",
                        help="TF32 flags for PyTorch: leave PyTorch's defaults, or force both off or on")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("suite_gpu_bench.py needs a CUDA device", file=sys.stderr)
        return 2
    if args.reference_tf32 != "default":
        torch.backends.cuda.matmul.allow_tf32 = args.reference_tf32 == "on"
        torch.backends.cudnn.allow_tf32 = args.reference_tf32 == "on"

    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=DEVICE)
    rows = []
    for problem_dir, solutions in _selected(args):
        try:
            problem_rows = bench_problem(problem_dir, solutions, args, flush)
        except Exception as exc:  # the reference itself failed (e.g. out of memory)
            traceback.print_exc()
            problem_rows = [{"problem": f"{problem_dir.parent.name}/{problem_dir.name}", "level": None,
                             "solution": None, "error": f"reference: {type(exc).__name__}: {exc}"}]
        for row in problem_rows:
            print(json.dumps(row), flush=True)
        rows += problem_rows
    ok_rows = [r for r in rows if r.get("ref_ms") is not None]
    _print_table(ok_rows)
    report = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32},
        "warmup": args.warmup,
        "iters": args.iters,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(report, indent=1))
    return 0 if all(r.get("correct") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
