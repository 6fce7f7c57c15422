"""KernelBench's own evaluator on one (problem, solution) pair: the yardstick of `benchmarks/oneshot.py`.

Runs ``kernelbench.eval.eval_kernel_against_ref`` from the copy that ``scripts/kernelbench_vendor.sh`` makes
(``.kernelbench/``, MIT), the way KernelBench's ``scripts/eval_from_generations.py`` evaluates one sample:
- a fresh process per evaluation (it spawns an ``mp.Pool`` per batch; here a fresh interpreter), with a
  180 s timeout (its ``timeout``);
- its script defaults: 5 correctness trials, 100 timed trials, ``timing_method="cuda_event"`` (L2 flushed
  before each trial), fp32, ``measure_performance=True``, and the evaluator's own excessive-speedup check,
  which times the reference 100 times too;
- its last-level catch: an exception inside the evaluation becomes a ``KernelExecResult`` with the error in
  its metadata (``compiled=False``), as the script records it;
- ``backend="triton"``: the evaluator imports ``ModelNew`` from a temporary file (Triton's ``@jit`` needs
  the source on disk) and pins ``CUDA_VISIBLE_DEVICES`` to the device.
The wall (``wall_s``) is the child process's, from its start to its exit: imports, CUDA context, compile,
correctness, timing. The child gets an empty ``TRITON_CACHE_DIR`` of its own, so the wall never depends on
what an earlier run left in ``~/.triton``.

``kernelbench.utils`` (which the package's ``__init__`` imports) imports ``dotenv``, ``openai`` and
``litellm`` for its LLM clients; where one is not installed (the GPU machine has none of them) the child
puts a stand-in module in its place (``load_dotenv`` does nothing; ``OpenAI`` and ``completion`` raise if
called) and the result names them in ``stand_ins``. The evaluator also needs torch, numpy, pydantic,
requests and tqdm (and triton for this backend): a missing one stops the run with a message naming it.
Nothing here imports drkernel.

On a machine without CUDA, ``eval_kernel_against_ref`` asserts ``torch.cuda.is_available()``; ``--dry-run``
instead loads the reference and ``ModelNew`` with KernelBench's own loaders and builds both models on the CPU.

    python3 benchmarks/kernelbench_yardstick.py --kernelbench .kernelbench --problem 19_ReLU \\
        --solution tests/gym/solutions/relu_19.py [--device cuda:0] [--dry-run] [--out out/kb.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROWS = REPO / "tests" / "data" / "kernelbench_level1_level2.jsonl"
VENDOR = "scripts/kernelbench_vendor.sh"
NEEDED = ("torch", "numpy", "pydantic", "requests", "tqdm", "triton")
STAND_INS = {"dotenv": "load_dotenv", "openai": "OpenAI", "litellm": "completion"}


class YardstickError(RuntimeError):
    """The yardstick itself could not run (a missing copy, file, package or device); never a verdict."""


@dataclasses.dataclass(frozen=True)
class Job:
    """One evaluation, written by the parent for the child as JSON."""

    kernelbench: str  # the vendored folder (holds src/kernelbench/)
    reference_src: str  # KernelBench's problem source (class Model, get_inputs, get_init_inputs)
    solution_src: str  # the candidate (class ModelNew)
    device: str
    result_path: str
    build_dir: str
    dry_run: bool = False
    num_correct_trials: int = 5
    num_perf_trials: int = 100
    timing_method: str = "cuda_event"
    backend: str = "triton"
    precision: str = "fp32"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one evaluation gave: KernelBench's ``KernelExecResult`` fields and the walls.

    ``runtime_ms``/``ref_runtime_ms``: its mean timed trial (milliseconds; -1 where not measured).
    ``status``: "ok" (it returned a result), "none" (it returned None: its lock-file retry case),
    "timeout" (the child outran ``timeout_s`` and was killed), or "dry_run".
    """

    status: str
    wall_s: float
    compiled: bool = False
    correctness: bool = False
    runtime_ms: float = -1.0
    ref_runtime_ms: float = -1.0
    runtime_stats: dict = dataclasses.field(default_factory=dict)
    ref_runtime_stats: dict = dataclasses.field(default_factory=dict)
    metadata: dict = dataclasses.field(default_factory=dict)
    import_s: float = 0.0  # the child's import of torch and kernelbench
    evaluate_s: float = 0.0  # eval_kernel_against_ref itself (dry run: the loaders)
    stand_ins: tuple = ()
    kernelbench_commit: str = ""
    log_tail: str = ""  # the last of what the evaluator printed (its warnings: excessive speedup, errors)

    @property
    def comparable(self) -> bool:
        """Its wall holds a whole evaluation (compiled, correct, timed), so a ratio to it means something."""
        return self.status == "ok" and self.compiled and self.correctness and self.runtime_ms > 0


def vendored(kb_dir: str | Path) -> Path:
    """The vendored folder, checked: its evaluator module, licence and provenance are there."""
    root = Path(kb_dir).resolve()
    for rel in ("src/kernelbench/eval.py", "LICENSE", "SOURCE.txt"):
        if not (root / rel).is_file():
            raise YardstickError(f"{root / rel} is missing: run {VENDOR} first (it copies KernelBench's "
                                 "evaluator)")
    return root


def commit_of(root: Path) -> str:
    """The KernelBench commit recorded in SOURCE.txt."""
    for line in (root / "SOURCE.txt").read_text().splitlines():
        if line.startswith("commit: "):
            return line.split(" ", 1)[1]
    return "unknown"


def reference_source(name: str, rows: str | Path = ROWS) -> str:
    """The problem's reference source from a rows file (JSON lines with ``name`` and ``code``)."""
    with open(rows) as f:
        for line in f:
            row = json.loads(line)
            if row.get("name") == name:
                return str(row["code"])
    raise YardstickError(f"problem {name!r} is not in {rows}")


def missing_packages() -> list[str]:
    """The packages KernelBench's evaluator imports that this interpreter cannot find."""
    return [m for m in NEEDED if importlib.util.find_spec(m) is None]


def evaluate(kb_dir: str | Path, reference_src: str, solution_src: str, device: str = "cuda:0",
             timeout_s: float = 180.0, dry_run: bool = False, **job_fields) -> Outcome:
    """One evaluation by KernelBench's evaluator in a fresh process; YardstickError if it cannot run."""
    root = vendored(kb_dir)
    lacking = missing_packages()
    if lacking:
        raise YardstickError(f"KernelBench's evaluator needs {', '.join(lacking)}, not importable here "
                             "(on the GPU machine pydantic comes from .whl: scripts/device_wheels.sh)")
    with tempfile.TemporaryDirectory(prefix="kernelbench_") as tmp:
        job = Job(kernelbench=str(root), reference_src=reference_src, solution_src=solution_src,
                  device=device, result_path=os.path.join(tmp, "result.json"),
                  build_dir=os.path.join(tmp, "build"), dry_run=dry_run, **job_fields)
        spec = Path(tmp, "job.json")
        spec.write_text(json.dumps(dataclasses.asdict(job)))
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, "triton_cache"))
        t0 = time.monotonic()
        try:
            script = str(Path(__file__).resolve())
            proc = subprocess.run([sys.executable, script, "--child", str(spec)], env=env, cwd=tmp,
                                  capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return Outcome(status="timeout", wall_s=time.monotonic() - t0, kernelbench_commit=commit_of(root))
        wall = time.monotonic() - t0
        if proc.returncode != 0 or not os.path.exists(job.result_path):
            raise YardstickError(f"KernelBench's evaluator process failed (rc {proc.returncode}):\n"
                                 f"{(proc.stdout + proc.stderr)[-3000:]}")
        fields = json.loads(Path(job.result_path).read_text())
    fields["stand_ins"] = tuple(fields.get("stand_ins", ()))
    return Outcome(wall_s=wall, kernelbench_commit=commit_of(root), log_tail=(proc.stdout + proc.stderr)[-2000:],
                   **fields)


# ---- the child: runs inside the fresh process ----------------------------------------------------------

def _unavailable(module: str, attr: str):
    def call(*args, **kwargs):
        raise RuntimeError(f"{module}.{attr} is a stand-in: {module} is not installed (only KernelBench's "
                           "LLM clients use it, never its evaluator)")
    return call


def _install_stand_ins() -> list[str]:
    """Stand-ins for the LLM-client modules kernelbench.utils imports, where they are not installed."""
    made = []
    for module, attr in STAND_INS.items():
        if importlib.util.find_spec(module) is None:
            stand_in = types.ModuleType(module)
            does = (lambda *a, **k: False) if module == "dotenv" else _unavailable(module, attr)
            setattr(stand_in, attr, does)
            sys.modules[module] = stand_in
            made.append(module)
    return made


def _result_fields(result) -> dict:
    """A KernelExecResult as JSON-able Outcome fields (its metadata may hold exception objects)."""
    if result is None:
        return {"status": "none"}
    return {"status": "ok", "compiled": result.compiled, "correctness": result.correctness,
            "runtime_ms": result.runtime, "ref_runtime_ms": result.ref_runtime,
            "runtime_stats": result.runtime_stats, "ref_runtime_stats": result.ref_runtime_stats,
            "metadata": json.loads(json.dumps(result.metadata, default=str))}


def _evaluate_as_script(kernel_eval, job: Job, torch):
    """eval_from_generations.evaluate_single_sample: the call with its arguments, and its last-level catch."""
    device = torch.device(job.device)
    try:
        return kernel_eval.eval_kernel_against_ref(
            original_model_src=job.reference_src, custom_model_src=job.solution_src, measure_performance=True,
            timing_method=job.timing_method, verbose=False, num_correct_trials=job.num_correct_trials,
            num_perf_trials=job.num_perf_trials, build_dir=job.build_dir, device=device, backend=job.backend,
            precision=kernel_eval.get_torch_dtype_from_string(job.precision))
    except Exception as e:  # noqa: BLE001 - the script records any exception as a failed sample
        key = "cuda_error" if "CUDA error" in str(e) else "other_error"
        metadata = {key: f"error: {e}", f"{key}_name": kernel_eval.get_error_name(e),
                    "hardware": torch.cuda.get_device_name(device=device), "device": str(device)}
        return kernel_eval.KernelExecResult(compiled=False, correctness=False, metadata=metadata)


def _dry_run(kernel_eval, job: Job, torch) -> dict:
    """On the CPU: KernelBench's loaders read both sources and build both models (no kernel runs)."""
    Model, get_init_inputs, _ = kernel_eval.load_original_model_and_inputs(job.reference_src, {})
    kernel_eval.set_seed(42)
    init_inputs = get_init_inputs()
    with torch.no_grad():
        Model(*init_inputs)
        ModelNew, tmp = kernel_eval.load_custom_model_with_tempfile(job.solution_src, entry_point="ModelNew")
        try:
            ModelNew(*init_inputs)
        finally:
            os.remove(tmp.name)
    kernel_eval.KernelExecResult(compiled=True, correctness=False, metadata={"dry_run": True})
    return {"status": "dry_run", "compiled": True,
            "metadata": {"note": "loaders only: eval_kernel_against_ref asserts torch.cuda.is_available()"}}


def child(spec_path: str) -> int:
    """Run one Job in this (fresh) process and write its Outcome fields to job.result_path."""
    job = Job(**json.loads(Path(spec_path).read_text()))
    t0 = time.monotonic()
    stand_ins = _install_stand_ins()
    sys.path.insert(0, os.path.join(job.kernelbench, "src"))
    import torch
    from kernelbench import eval as kernel_eval
    imported = time.monotonic()
    if not job.dry_run and not torch.cuda.is_available():
        print("KernelBench's eval_kernel_against_ref needs CUDA (it asserts torch.cuda.is_available()); "
              "use --dry-run on a CPU", file=sys.stderr)
        return 2
    fields = _dry_run(kernel_eval, job, torch) if job.dry_run else _result_fields(
        _evaluate_as_script(kernel_eval, job, torch))
    fields.update(import_s=imported - t0, evaluate_s=time.monotonic() - imported, stand_ins=stand_ins)
    Path(job.result_path).write_text(json.dumps(fields))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelbench", default=str(REPO / ".kernelbench"), help=f"the folder {VENDOR} made")
    ap.add_argument("--problem", required=True, help="a problem name in --rows, e.g. 19_ReLU")
    ap.add_argument("--solution", required=True, help="a Python file defining ModelNew (Triton)")
    ap.add_argument("--rows", default=str(ROWS))
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--timeout-s", type=float, default=180.0, help="KernelBench's per-evaluation timeout")
    ap.add_argument("--dry-run", action="store_true", help="CPU: KernelBench's loaders only, no evaluation")
    ap.add_argument("--out", help="write the outcome here as JSON")
    args = ap.parse_args(argv)
    try:
        outcome = evaluate(args.kernelbench, reference_source(args.problem, args.rows),
                           Path(args.solution).read_text(), device=args.device, timeout_s=args.timeout_s,
                           dry_run=args.dry_run)
    except (YardstickError, OSError) as e:
        print(f"FAIL kernelbench_yardstick: {e}", file=sys.stderr)
        return 2
    report = dict(dataclasses.asdict(outcome), problem=args.problem, solution=args.solution,
                  comparable=outcome.comparable)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))
    shown = ("problem", "status", "compiled", "correctness", "runtime_ms", "ref_runtime_ms", "wall_s",
             "import_s", "evaluate_s", "stand_ins")
    print(json.dumps({k: report[k] for k in shown}))
    return 0 if outcome.status in ("ok", "dry_run") else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2]))
    sys.exit(main())
