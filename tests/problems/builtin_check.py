"""A stand-in evaluator for the built-in problem suite, used by ``test_builtin_suite.py``.

It is a test helper, not a product feature: once ``drkernel.gym`` lands, the suite test switches to
the real gym and this module goes away. Only ``EXPECTATIONS`` (what each solution label must do) is
meant to survive the switch.

What it does, per problem, in a child process with ``TRITON_INTERPRET=1`` set before triton loads:
1. import ``reference.py`` and each solution file as modules (from their files, so that the Triton
   interpreter can read kernel source);
2. apply ``meta.json``'s ``cpu_overrides`` by setting the reference module's size constants;
3. ``torch.manual_seed(MODEL_SEED)`` before building ``Model`` and again before ``ModelNew``;
4. for each trial seed: draw inputs with ``get_inputs()``, run both models on clones, compare with
   ``atol = rtol = 1e-2``, check that the solution left its inputs untouched;
5. while the solution's ``forward`` runs, count the aten ops it issues outside Triton launches
   (a ``TorchDispatchMode`` suspended inside ``InterpretedFunction.run``), minus allocation and
   view ops.

Run as a script: ``python builtin_check.py PROBLEM_DIR [PROBLEM_DIR ...]`` prints one JSON object
per solution on stdout.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SUITE_DIR = Path(__file__).resolve().parents[2] / "src" / "drkernel" / "problems" / "builtin"
ATOL = RTOL = 1e-2
MODEL_SEED = 0
TRIAL_SEEDS = (1, 2)
SOLUTION_LABELS = ("gold", "lazy", "slow", "broken")


@dataclasses.dataclass(frozen=True)
class Expectation:
    """What a solution with a given label must show under evaluation.

    correct: the outputs must match the reference (None: not checked).
    torch_compute: PyTorch compute ops must run in forward (True), must not (False), or either (None).
    """

    correct: bool | None
    torch_compute: bool | None


# The one table mapping a solution's label (its filename prefix) to what the evaluator must see.
EXPECTATIONS: dict[str, Expectation] = {
    "gold": Expectation(correct=True, torch_compute=False),
    "lazy": Expectation(correct=True, torch_compute=True),
    "slow": Expectation(correct=True, torch_compute=False),
    "broken": Expectation(correct=False, torch_compute=None),
}

# aten ops a solution may issue without counting as PyTorch compute: allocation and views.
ALLOCATION_AND_VIEW_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "permute",
    "transpose", "t", "unsqueeze", "squeeze", "select", "slice", "alias", "detach", "unbind",
    "split", "split_with_sizes", "lift_fresh", "unflatten",
})


@dataclasses.dataclass
class SolutionReport:
    """The outcome of checking one solution file against its problem."""

    problem: str
    solution: str
    label: str
    loaded: bool = False
    correct: bool = False
    mutated_inputs: bool = False
    torch_ops: dict[str, int] = dataclasses.field(default_factory=dict)
    launches: int = 0
    max_abs_err: float | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    error: str | None = None


def label_of(solution_file: str) -> str:
    """The label of a solution file: ``gold.py`` -> gold, ``lazy_torch_mm.py`` -> lazy."""
    stem = Path(solution_file).stem
    label = stem.split("_", 1)[0]
    if label not in SOLUTION_LABELS:
        raise ValueError(f"{solution_file}: unknown solution label {label!r}")
    return label


def solution_files(problem_dir: Path) -> list[str]:
    """Solution filenames of a problem, gold first."""
    names = [p.name for p in problem_dir.glob("*.py")
             if p.stem.split("_", 1)[0] in SOLUTION_LABELS]
    return sorted(names, key=lambda n: (n != "gold.py", n))


def problem_dirs(suite_dir: Path = SUITE_DIR) -> list[Path]:
    """All problem directories of the suite, ordered by level then name."""
    return sorted(p.parent for p in suite_dir.glob("level*/*/reference.py"))


def check_problems(dirs: list[Path], timeout: float = 600.0) -> list[SolutionReport]:
    """Check the problems in ``dirs`` in one child process and return its reports."""
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, __file__, *map(str, dirs)], capture_output=True,
                          text=True, timeout=timeout, env=env)
    reports = [SolutionReport(**json.loads(line)) for line in proc.stdout.splitlines()
               if line.startswith("{")]
    if proc.returncode != 0:
        raise RuntimeError(f"checker child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return reports


# --- everything below runs in the child process -------------------------------------------------


def _import_file(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _flatten(out) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _flatten(item)]
    raise TypeError(f"unsupported output type {type(out).__name__}")


def _compare(ref, sol) -> tuple[bool, float]:
    """(allclose under ATOL/RTOL with matching shapes and dtypes, max abs error)."""
    import torch

    ref, sol = _flatten(ref), _flatten(sol)
    if len(ref) != len(sol):
        return False, float("inf")
    ok, worst = True, 0.0
    for r, s in zip(ref, sol):
        if r.shape != s.shape or r.dtype != s.dtype:
            return False, float("inf")
        r64, s64 = r.double(), s.double()
        ok &= bool(torch.allclose(s64, r64, atol=ATOL, rtol=RTOL))
        if r.numel():
            worst = max(worst, float((s64 - r64).abs().max()))
    return ok, worst


class _OpCounter:
    """Counts aten ops issued outside Triton launches while active; counts launches too."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.overloadpacket.__name__
                counter.ops[name] = counter.ops.get(name, 0) + 1
                return func(*args, **(kwargs or {}))

        self.mode = Mode()
        self.ops: dict[str, int] = {}
        self.launches = 0
        self._install_launch_hook()

    def _install_launch_hook(self):
        from torch.utils._python_dispatch import _disable_current_modes
        from triton.runtime.interpreter import InterpretedFunction

        counter, run = self, InterpretedFunction.run

        def counted_run(fn_self, *args, **kwargs):
            # The interpreter issues its own aten ops per tensor argument: not the solution's.
            counter.launches += 1
            with _disable_current_modes():
                return run(fn_self, *args, **kwargs)

        InterpretedFunction.run = counted_run

    def compute_ops(self) -> dict[str, int]:
        return {k: v for k, v in sorted(self.ops.items()) if k not in ALLOCATION_AND_VIEW_OPS}


def _run_problem(problem_dir: Path, counter: _OpCounter) -> list[SolutionReport]:
    import torch

    meta = json.loads((problem_dir / "meta.json").read_text())
    tag = f"{problem_dir.parent.name}_{problem_dir.name}"
    ref_mod = _import_file(problem_dir / "reference.py", f"suite_ref_{tag}")
    for name, value in meta.get("cpu_overrides", {}).items():
        if not isinstance(getattr(ref_mod, name, None), int):
            raise KeyError(f"{tag}: cpu_overrides names {name}, not an int constant of reference.py")
        setattr(ref_mod, name, value)

    init_inputs = ref_mod.get_init_inputs()
    torch.manual_seed(MODEL_SEED)
    ref_model = ref_mod.Model(*init_inputs)
    trials = []
    for seed in TRIAL_SEEDS:
        torch.manual_seed(seed)
        inputs = ref_mod.get_inputs()
        with torch.no_grad():
            trials.append((inputs, ref_model(*_clone(inputs))))

    reports = []
    for filename in solution_files(problem_dir):
        report = SolutionReport(problem=tag, solution=filename, label=label_of(filename))
        start, cpu_start = time.perf_counter(), time.process_time()
        try:
            _run_solution(problem_dir / filename, tag, init_inputs, trials, counter, report)
        except Exception as exc:  # a bad solution is a result, not a crash of the checker
            report.error = f"{type(exc).__name__}: {exc}"[:2000]
        report.seconds = round(time.perf_counter() - start, 3)
        report.cpu_seconds = round(time.process_time() - cpu_start, 3)
        reports.append(report)
    return reports


def _clone(inputs):
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _run_solution(path, tag, init_inputs, trials, counter, report):
    import torch

    sol_mod = _import_file(path, f"suite_sol_{tag}_{path.stem}")
    torch.manual_seed(MODEL_SEED)
    model = sol_mod.ModelNew(*init_inputs)
    report.loaded = True
    counter.ops, counter.launches = {}, 0
    all_ok, worst, mutated = True, 0.0, False
    for inputs, ref_out in trials:
        args = _clone(inputs)
        with torch.no_grad(), counter.mode:
            out = model(*args)
        ok, err = _compare(ref_out, out)
        all_ok &= ok
        worst = max(worst, err)
        mutated |= any(isinstance(a, torch.Tensor) and not torch.equal(a, x)
                       for a, x in zip(args, inputs))
    report.correct, report.max_abs_err, report.mutated_inputs = all_ok, worst, mutated
    report.torch_ops, report.launches = counter.compute_ops(), counter.launches


def _main(argv: list[str]) -> None:
    os.environ["TRITON_INTERPRET"] = "1"
    import torch

    torch.set_num_threads(1)
    counter = _OpCounter()
    for arg in argv:
        for report in _run_problem(Path(arg), counter):
            print(json.dumps(dataclasses.asdict(report)), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
