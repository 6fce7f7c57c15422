"""The trainer data parallel on one host: 1, 2 and N ranks (nccl on GPUs, gloo on CPU) on one global batch.

Plain Python: needs torch, transformers (+ tokenizers) and triton only (no pyyaml, rich, typer, pydantic,
pytest), so it runs on a bare GPU box. The ranks are started by the library's ``launch``, what
``drkernel train --nproc N`` calls. Prints progress, PASS / FAIL lines and SUMMARY lines; writes
``train_dp.json`` and, with matplotlib, ``train_dp.png`` (tokens/s against ranks with the ideal line;
loss per step, one process vs data parallel) to ``--out``.

1. dp: for each N of ``--nproc-list`` the trainer runs ``--steps`` steps on the SAME fixed global batch
   (``--prompts`` x ``--samples`` rows of ``--seq`` prompt + ``--seq`` completion tokens, fixed rewards,
   no sampling; the env is swapped for :class:`FixedBatchEnv` after the trainer is built) with a tiny
   locally built Llama (``--hidden`` x ``--layers``, fp32, no download). One mini-batch, two epochs: a step
   is two optimizer updates on the whole batch (at the first the PPO ratio is 1 and the loss is
   -mean(advantage), about 0 whatever the weights; at the second it depends on them). Checks:

   - the weights are identical on every rank after every step: the trainer compares a fingerprint of
     the weights after each step's updates (and raises when they differ); each rank records the digest
     it saw (``Trainer.weights_fingerprint``) and the script compares them across ranks;
   - per step, ``loss/loss`` and ``loss/grad_norm`` (before clipping; both means over the step's two
     updates) and the batch's mean token NLL under the step's starting weights
     (``mismatch/mean_abs_log_ratio``: the rollout log-probs are 0) equal the one process run's:
     |dp - one| <= tol * max(|one|, 1), tol 1e-5 on CPU and 1e-4 on CUDA (fp32, TF32 off). The
     differences are float summation order: NCCL sums the ranks' partial gradients in another order
     than one process accumulates its micro-batches, and cuBLAS may pick other kernels. The loss is a
     cancelling sum of per-row terms of size |advantage| ~ 1, so its error scales with 1, not with the
     small total. Adam's eps is 1e-3 so that a last-bit gradient difference is not amplified (see
     tests/rl/test_trainer_distributed.py). Reported: the max abs and rel difference per quantity;
   - throughput: training tokens/s (every token of the rows, over the whole step) and steps/s, medians
     of the steps after the first (warm-up), and the scaling ratio against one rank.

2. kernel: ``--kernel-steps`` steps of the kernel task on N = max(``--nproc-list``) ranks with the
   in-process gym (``eval.device`` ``cuda``: rank r evaluates on cuda:r, see
   ``drkernel.rl.distributed.localize``); the built-in gold / lazy / broken solutions replayed through the
   model. Reported from ``episodes.jsonl``: the device of every evaluation (``EvalResult.device``) per
   rank. Check: rank r's evaluations ran on cuda:r and all N GPUs were used (on CPU: all on cpu).

Every process gets ``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and
``NVSHMEM_DISABLE_NVLS=1`` (no NVLink multicast).

    PYTHONPATH=src python3 benchmarks/train_dp_gpu.py --out out/train_dp              # 4 GPUs, ~3 minutes
    PYTHONPATH=src python3 benchmarks/train_dp_gpu.py --device cpu --nproc-list 1,2 --out out/train_dp_cpu
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path.insert(0, SRC)
sys.path.insert(0, str(Path(__file__).resolve().parent))  # train_gpu: the PASS / FAIL lines
# The gym's worker processes are fresh interpreters: they find drkernel through PYTHONPATH.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
# No NVLink multicast in any process (the spawned ranks and the gym's children inherit these).
os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")

import torch  # noqa: E402
from train_gpu import CHECKS, check, model_section  # noqa: E402  (the PASS / FAIL lines, the tiny model)

from drkernel.rl.config import config_from_dict  # noqa: E402
from drkernel.rl.distributed import launch, share  # noqa: E402
from drkernel.rl.envs import StepRollout  # noqa: E402
from drkernel.rl.rows import TurnRecord  # noqa: E402
from drkernel.rl.trainer import Trainer  # noqa: E402
from drkernel.tasks import build_env, train  # noqa: E402

COMPARED = ("loss/loss", "loss/grad_norm", "mismatch/mean_abs_log_ratio")
"""Per-step quantities that must equal the one-process run's (the last is the batch's mean token NLL)."""
TOLERANCE = {"cpu": 1e-5, "cuda": 1e-4}
"""Tolerance of |dp - one process| / max(|one process|, 1) per device kind: fp32 summation order."""
class FixedBatchEnv:
    """The same ``prompts`` x ``samples`` rows every step, whatever the number of ranks: prompt and
    completion tokens drawn once per prompt group from a seeded generator, rewards fixed and different
    within each group, every row ``2 * seq`` tokens (equal lengths: the ranks' token counts are equal, so
    row-weighted per-token means reduce exactly). Rank r gets its contiguous share of the groups."""

    def __init__(self, prompts: int, samples: int, seq: int, vocab: int, rank: int, world_size: int):
        self.samples, self.seq, self.vocab = samples, seq, vocab
        self.groups = share(range(prompts), rank, world_size)

    async def rollout(self, policy: Any, step: int) -> StepRollout:
        records = []
        for local, group in enumerate(self.groups):
            g = torch.Generator().manual_seed(group)
            prompt = torch.randint(8, self.vocab, (self.seq,), generator=g).tolist()  # above special ids
            for sample in range(self.samples):
                completion = torch.randint(8, self.vocab, (self.seq,), generator=g).tolist()
                records.append(
                    TurnRecord(
                        group=local,
                        traj=local * self.samples + sample,
                        turn=0,
                        prompt_ids=tuple(prompt),
                        completion_ids=tuple(completion),
                        rollout_logprobs=(0.0,) * self.seq,
                        reward=float((group + 2 * sample) % 3),
                    )
                )
        return StepRollout(records=records)

    def close(self) -> None:
        pass


def dp_rank(config: Any) -> None:
    """One rank of a dp run (module level: ``launch`` pickles it by name). Trains on the fixed batch and
    writes ``rank<r>.json``: per step the metrics, this rank's weight digest and the wall time."""
    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    r = config.rollout
    trainer = Trainer(config, build_env)
    trainer.env.close()
    trainer.env = FixedBatchEnv(
        r.prompts_per_step, r.samples_per_prompt, r.max_tokens, len(trainer.tokenizer), rank, world_size
    )
    steps = []
    try:
        while trainer.step < config.run.steps:
            t0 = time.perf_counter()
            metrics = trainer.train_step()
            wall = time.perf_counter() - t0
            steps.append({"metrics": metrics, "print": trainer.weights_fingerprint, "wall_s": wall})
    finally:
        trainer.close()
    record = {"rank": rank, "device": str(trainer.device), "steps": steps}
    (Path(config.run.output_dir) / f"rank{rank}.json").write_text(json.dumps(record))


def dp_config(args: argparse.Namespace, out: Path) -> Any:
    return config_from_dict(
        {
            "run": {
                "output_dir": str(out),
                "steps": args.steps,
                "resume": False,
                "save_every": 10_000,
                "save_episodes": False,
                "progress": False,
                "keep_checkpoints": 1,
            },
            "model": model_section(args),
            "rollout": {
                "backend": "hf",
                "share_weights": True,
                "prompts_per_step": args.prompts,
                "samples_per_prompt": args.samples,
                "turns": 1,
                "max_tokens": args.seq,
            },
            "task": {"kind": "sanity"},  # replaced by FixedBatchEnv; the sanity env is the cheapest to build
            "algorithm": {"mrs": False, "prs": False},  # the fixed rows' rollout log-probs are placeholders
            "optim": {
                "lr": 1e-4,
                "eps": 1e-3,  # Adam does not amplify last-bit gradient differences (see the docstring)
                "weight_decay": 0.0,
                "epochs": 2,
                "micro_batch_rows": args.micro_rows,
            },
        }
    )


def run_dp(args: argparse.Namespace, nproc: int) -> dict:
    """One dp run on ``nproc`` ranks; returns per-rank records plus throughput medians."""
    out = args.out / f"dp{nproc}"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    launch(dp_rank, dp_config(args, out), nproc)
    wall = time.perf_counter() - t0
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    steps = [s["metrics"] for s in ranks[0]["steps"]]
    timed = steps[1:] or steps  # the first step warms up (allocator, kernels)
    tokens = statistics.median(m["perf/train_tokens"] / m["perf/step_s"] for m in timed)
    result = {
        "nproc": nproc,
        "devices": [r["device"] for r in ranks],
        "wall_s": wall,
        "train_tokens_per_step": steps[0]["perf/train_tokens"],
        "tokens_per_s": tokens,
        "trainer_train_tokens_per_s": statistics.median(m["perf/train_tokens_per_s"] for m in timed),
        "steps_per_s": statistics.median(1 / m["perf/step_s"] for m in timed),
        "per_step": {k: [m[k] for m in steps] for k in (*COMPARED, "perf/step_s")},
        "prints": [[s["print"] for s in r["steps"]] for r in ranks],
    }
    print(
        f"dp nproc={nproc}: {len(steps)} steps on {result['devices']}, {tokens:.0f} train tokens/s, "
        f"{result['steps_per_s']:.2f} steps/s, "
        f"loss {[round(x, 5) for x in result['per_step']['loss/loss']]}; {wall:.1f} s",
        flush=True,
    )
    return result


def compare(runs: list[dict], device: str) -> dict:
    """Checks every run against the one-process run (``runs[0]``, nproc 1); returns max differences."""
    base, tol = runs[0], TOLERANCE["cuda" if device.startswith("cuda") else "cpu"]
    diffs = {}
    for run in runs[1:]:
        n = run["nproc"]
        prints = run["prints"]
        same = all(p == prints[0] for p in prints) and all(prints[0])
        check(
            f"dp{n} weights identical on every rank after every step",
            same,
            f"{len(prints[0])} steps x {n} ranks, last digest {prints[0][-1] or 'none'}",
        )
        for key in COMPARED:
            pairs = list(zip(base["per_step"][key], run["per_step"][key]))
            abs_d = max(abs(a - b) for a, b in pairs)
            rel_d = max(abs(a - b) / max(abs(a), 1e-6) for a, b in pairs)
            diffs[f"{n}/{key}"] = {"max_abs": abs_d, "max_rel": rel_d}
            ok = all(abs(a - b) <= tol * max(abs(a), 1.0) for a, b in pairs)
            check(
                f"dp{n} {key} equals one process",
                ok,
                f"max abs {abs_d:.2e}, max rel {rel_d:.2e} over {len(pairs)} steps; "
                f"tolerance {tol:g} x max(|x|, 1)",
            )
    return diffs


def kernel_config(args: argparse.Namespace, nproc: int, out: Path) -> Any:
    cuda = args.device != "cpu"
    return config_from_dict(
        {
            "run": {
                "output_dir": str(out),
                "steps": args.kernel_steps,
                "resume": False,
                "save_every": 10_000,
                "progress": False,
                "keep_checkpoints": 1,
            },
            "model": model_section(args),
            "rollout": {
                "backend": "hf",
                "batch_size": 16,
                "prompts_per_step": nproc,  # one problem per rank per step
                "samples_per_prompt": 2,
                "turns": args.kernel_turns,
                "max_tokens": 4096,
                "concurrency": 16,
            },
            "gym": {"kind": "in_process", "concurrency": 2, "pool_size": 2 if cuda else 1},
            "eval": {
                "device": "cuda" if cuda else "cpu",  # rank r: cuda:r (drkernel.rl.distributed.localize)
                "timing": cuda,
                "profile": True,
                "trials": 3,
                "timeout_s": 180,
            },
            "task": {
                "kind": "kernel",
                "problems": "builtin",
                "replay_builtin": True,
                "levels": [1],
                "include": args.kernel_include,
            },
            "optim": {"lr": 1e-5, "micro_batch_rows": 4},
        }
    )


def run_kernel(args: argparse.Namespace, nproc: int) -> dict:
    """The kernel task on ``nproc`` ranks; which device each rank's evaluations ran on."""
    out = args.out / f"kernel{nproc}"
    shutil.rmtree(out, ignore_errors=True)
    config = kernel_config(args, nproc, out)
    t0 = time.perf_counter()
    launch(train, config, nproc)  # what `drkernel train --nproc N` runs
    wall = time.perf_counter() - t0
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    per_rank = (config.rollout.prompts_per_step // nproc) * config.rollout.samples_per_prompt
    by_step: dict[int, list[dict]] = {}
    for e in episodes:  # rank 0 writes every rank's episodes of a step in rank order
        by_step.setdefault(e["step"], []).append(e)
    devices: dict[int, dict[str, int]] = {r: {} for r in range(nproc)}
    for step_episodes in by_step.values():
        for i, e in enumerate(step_episodes):
            for t in e["turns"]:
                if t.get("result") and t["result"].get("device"):
                    seen = devices[i // per_rank]
                    seen[t["result"]["device"]] = seen.get(t["result"]["device"], 0) + 1
    evaluations = sum(sum(d.values()) for d in devices.values())
    print(f"kernel nproc={nproc}: {evaluations} evaluations, per rank {devices}; {wall:.0f} s", flush=True)
    check("kernel evaluations ran", evaluations > 0, f"{evaluations} evaluations over {len(by_step)} steps")
    if args.device == "cpu":
        on_cpu = all(set(d) <= {"cpu"} for d in devices.values())
        check("kernel evaluations on cpu", on_cpu, f"devices per rank {devices}")
        check("kernel rank r evaluates on cuda:r", False, "", skip="cpu run")
    else:
        own = all(set(d) == {f"cuda:{r}"} for r, d in devices.items())
        check("kernel rank r evaluates on cuda:r", own, f"devices per rank {devices}")
        used = sorted({dev for d in devices.values() for dev in d})
        check("kernel evaluations spread over all GPUs", len(used) == nproc, f"{used} for {nproc} ranks")
    return {"nproc": nproc, "wall_s": wall, "evaluations": evaluations, "devices_per_rank": devices}


def plot(report: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        print("no matplotlib: train_dp.png not drawn (train_dp.json has the numbers)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = report["dp"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    ranks = [r["nproc"] for r in runs]
    left.plot(ranks, [r["tokens_per_s"] for r in runs], "-o", label="measured")
    left.plot(ranks, [runs[0]["tokens_per_s"] * n for n in ranks], "--", alpha=0.6, label="ideal (linear)")
    left.set_xlabel("ranks")
    left.set_ylabel("training tokens/s")
    left.set_xticks(ranks)
    left.set_title(f"throughput ({report['device']})")
    for r in runs:
        steps = range(1, len(r["per_step"]["loss/loss"]) + 1)
        style = "-o" if r["nproc"] == 1 else "--x"
        right.plot(steps, r["per_step"]["loss/loss"], style, ms=4, label=f"{r['nproc']} rank(s)")
    right.xaxis.get_major_locator().set_params(integer=True)
    right.set_xlabel("step")
    right.set_ylabel("loss/loss")
    right.set_title("loss per step: one process vs data parallel")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def summarize(report: dict) -> None:
    """SUMMARY lines; adds each dp run's scaling (tokens/s over one rank's) to the report."""
    runs = report.get("dp", [])
    for r in runs:
        r["scaling"] = r["tokens_per_s"] / runs[0]["tokens_per_s"]
    if runs:
        line = ", ".join(
            f"{r['nproc']}: {r['tokens_per_s']:.0f} tok/s {r['steps_per_s']:.2f} steps/s x{r['scaling']:.2f}"
            for r in runs
        )
        print(f"SUMMARY dp (ranks: training tokens/s, steps/s, scaling vs 1 rank): {line}", flush=True)
        worst: dict[str, float] = {}
        for key, d in report.get("dp_diffs", {}).items():
            name = key.split("/", 1)[1]
            worst[name] = max(worst.get(name, 0.0), d["max_rel"])
        print(f"SUMMARY dp max rel difference vs one process: {json.dumps(worst)}", flush=True)
    if "kernel" in report:
        k = report["kernel"]
        print(f"SUMMARY kernel: {k['evaluations']} evaluations, devices per rank {k['devices_per_rank']}")
    print(f"SUMMARY time per part (s): {json.dumps({k: round(v, 1) for k, v in report['times_s'].items()})}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--out", type=Path, default=Path("out/train_dp"))
    add("--device", default="cuda", help="cuda (nccl, rank r on cuda:r) or cpu (gloo, a dry run)")
    add("--nproc-list", default="1,2,4", help="rank counts, comma separated; the first must be 1")
    add("--hidden", type=int, default=None, help="default 1024 on cuda, 32 on cpu")
    add("--layers", type=int, default=None, help="default 8 on cuda, 2 on cpu")
    add("--heads", type=int, default=None, help="default 16 on cuda, 4 on cpu")
    add("--steps", type=int, default=None, help="dp steps per run; default 8 on cuda, 3 on cpu")
    add("--prompts", type=int, default=None, help="prompt groups per step; default 32 on cuda, 4 on cpu")
    add("--samples", type=int, default=4, help="rows per prompt group")
    add("--seq", type=int, default=None, help="prompt = completion tokens; default 256 on cuda, 16 on cpu")
    add("--micro-rows", type=int, default=None, help="rows per micro-batch; default 8 on cuda, 2 on cpu")
    add("--kernel-steps", type=int, default=2)
    add("--kernel-turns", type=int, default=None, help="default 2 on cuda, 1 on cpu")
    add("--kernel-include", action="append", default=None, help="problem key substrings")
    add("--skip", action="append", default=[], choices=["dp", "kernel"])
    args = parser.parse_args()
    cuda = args.device != "cpu"
    defaults = {
        "hidden": (1024, 32), "layers": (8, 2), "heads": (16, 4), "steps": (8, 3), "prompts": (32, 4),
        "seq": (256, 16), "micro_rows": (8, 2), "kernel_turns": (2, 1),
        "kernel_include": (["gelu", "softplus", "silu", "mish"], ["gelu", "softplus"]),
    }
    for name, (gpu, cpu) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, gpu if cuda else cpu)
    args.nproc = [int(n) for n in args.nproc_list.split(",")]
    return args


def main() -> None:
    args = parse_args()
    if args.nproc[0] != 1:
        sys.exit("--nproc-list must start with 1 (the one-process reference)")
    if args.device != "cpu" and torch.cuda.device_count() < max(args.nproc):
        print(f"CHECK cuda devices: FAIL ({torch.cuda.device_count()} GPUs for {max(args.nproc)} ranks)")
        sys.exit(1)
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if args.device != "cpu" else "cpu",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": torch.__version__,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "times_s": {},
    }
    print(json.dumps(report), flush=True)
    parts = {
        "dp": lambda: [run_dp(args, n) for n in args.nproc],
        "kernel": lambda: run_kernel(args, max(args.nproc)),
    }
    for name, fn in parts.items():
        if name in args.skip:
            continue
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            report[name] = fn()
        except Exception as e:  # report and go on: one part failing must not hide the other's numbers
            import traceback

            traceback.print_exc()
            check(f"{name} ran", False, f"{type(e).__name__}: {e}")
        report["times_s"][name] = time.perf_counter() - t0
    if "dp" in report:
        report["dp_diffs"] = compare(report["dp"], args.device)
        plot(report, args.out / "train_dp.png")
    summarize(report)
    report["checks"] = [{"name": n, "ok": ok, "detail": d} for n, ok, d in CHECKS]
    (args.out / "train_dp.json").write_text(json.dumps(report, indent=2))
    failed = [n for n, ok, _ in CHECKS if not ok]
    verdict = f"; FAILED: {failed}" if failed else ""
    print(f"train_dp: {len(CHECKS) - len(failed)}/{len(CHECKS)} checks passed{verdict}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
