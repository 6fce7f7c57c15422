"""The trainer on a GPU: learning sanity with a larger model, bf16 mismatch, and the kernel task end to end.

Plain Python: needs torch, transformers (+ tokenizers) and triton only (no pyyaml, rich, typer,
pytest), so it runs on a bare GPU box. Prints every number, a PASS / FAIL line per check and SUMMARY
lines, and writes ``train_gpu.json``, the sanity curve as CSV and, with matplotlib, ``sanity_curve.png``
to ``--out``.

1. sanity: a randomly initialised Llama (``--hidden`` x ``--layers``, built on the spot with a locally
   trained tokenizer) learns to answer in digits; 16 prompts x 16 samples per step, fp32, shared
   weights (so MRS must keep everything). Check: the mean reward of the last 5 steps is >= 0.3 above
   step 1's (sampled before any update).
2. bf16 mismatch: two steps with bf16 weights; reports the rollout-vs-trainer log-ratio and what MRS
   rejects at the paper's bounds (KV-cached decoding vs one full forward differ in bf16).
3. kernel: steps of the kernel task with the in-process gym on the GPU (timing and profiling on): the
   built-in gold / lazy / broken solutions replayed through the model (``task.replay_builtin``), so
   rewards come from real GPU evaluations (speedup, time coverage, PR, PRS). Checks: evaluations ran,
   some were correct, speedups and time coverage were measured.

Run: ``PYTHONPATH=src python benchmarks/train_gpu.py --out out/train_gpu`` (about 5 minutes on an H100).
Dry run without a GPU: ``--device cpu --hidden 32 --layers 2 --heads 4 --sanity-steps 6 --kernel-steps 1
--kernel-prompts 1 --kernel-include softplus``.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path.insert(0, SRC)
# The gym's worker processes are fresh interpreters: they find drkernel through PYTHONPATH.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)

import torch  # noqa: E402

from drkernel.rl.config import config_from_dict  # noqa: E402
from drkernel.tasks import train  # noqa: E402

CHECKS: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str, skip: str = "") -> None:
    """A PASS / FAIL line; with ``skip`` (why the check cannot hold on this run) a SKIP line, not counted."""
    if skip:
        print(f"CHECK {name}: SKIP ({skip}; {detail})", flush=True)
        return
    CHECKS.append((name, ok, detail))
    print(f"CHECK {name}: {'PASS' if ok else 'FAIL'} ({detail})", flush=True)


def model_section(args: argparse.Namespace, precision: str = "fp32") -> dict:
    return {
        "source": "tiny",
        "tiny_hidden": args.hidden,
        "tiny_layers": args.layers,
        "tiny_heads": args.heads,
        "device": args.device,
        "precision": precision,
    }


def run_sanity(args: argparse.Namespace) -> dict:
    config = config_from_dict(
        {
            "run": {
                "output_dir": str(args.out / "sanity"),
                "steps": args.sanity_steps,
                "resume": False,
                "save_every": 10_000,
                "save_episodes": False,
                "progress": False,
            },
            "model": model_section(args),
            "rollout": {
                "backend": "hf",
                "share_weights": True,
                "batch_size": 256,
                "prompts_per_step": 16,
                "samples_per_prompt": 16,
                "turns": 1,
                "max_tokens": 16,
                "temperature": 1.0,
                "top_p": 1.0,
            },
            "task": {"kind": "sanity"},
            "algorithm": {"prs": False},
            "optim": {"lr": args.sanity_lr, "weight_decay": 0.0, "micro_batch_rows": 256},
        }
    )
    t0 = time.perf_counter()
    history = train(config)
    wall = time.perf_counter() - t0
    rewards = [m["reward/mean"] for m in history]
    for i, m in enumerate(history, 1):
        print(
            f"sanity step {i:3d}  reward {m['reward/mean']:.3f}  all-digits {m['reward/format_exact']:.3f}  "
            f"mrs-rejected {m['mismatch/rejected_fraction']:.3f}  "
            f"max|log ratio| {m['mismatch/max_abs_log_ratio']:.2e}  "
            f"gen tok/s {m['perf/tokens_per_s']:.0f}  train tok/s {m['perf/train_tokens_per_s']:.0f}  "
            f"step {m['perf/step_s']:.2f}s",
            flush=True,
        )
    # The baseline is step 1's rollout, sampled before any update: the 8 x 512 model can learn the task
    # within 3-4 steps (on CPU: 0.01, 0.05, 0.66, 0.96), so a first-5 mean would already include learning.
    first, first5 = rewards[0], sum(rewards[:5]) / len(rewards[:5])
    last = sum(rewards[-5:]) / len(rewards[-5:])
    check(
        "sanity reward rises",
        last - first >= 0.3,
        f"step 1 (before any update) {first:.3f} -> mean of the last 5 steps {last:.3f}",
        skip="fewer than 10 steps" if len(rewards) < 10 else "",
    )
    check(
        "sanity MRS keeps all with shared fp32 weights",
        all(m["mismatch/rejected_fraction"] == 0 for m in history),
        f"max rejected fraction {max(m['mismatch/rejected_fraction'] for m in history):.3f}",
    )
    plot_curve(rewards, [m["reward/format_exact"] for m in history], args.out / "sanity_curve.png")
    (args.out / "sanity_curve.csv").write_text(
        "step,reward_mean,format_exact\n"
        + "".join(
            f"{i},{m['reward/mean']:.4f},{m['reward/format_exact']:.4f}\n" for i, m in enumerate(history, 1)
        )
    )
    return {
        "wall_s": wall,
        "reward_mean": rewards,
        "step1": first,
        "first5": first5,
        "last5": last,
        "gen_tokens_per_s_median": sorted(m["perf/tokens_per_s"] for m in history)[len(history) // 2],
        "train_tokens_per_s_median": sorted(m["perf/train_tokens_per_s"] for m in history)[len(history) // 2],
    }


def plot_curve(rewards: list[float], exact: list[float], path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        print("no matplotlib: sanity_curve.png not drawn (the CSV has the curve)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    steps = range(1, len(rewards) + 1)
    ax.plot(steps, rewards, "-o", ms=3, label="mean reward")
    ax.plot(steps, exact, "-", alpha=0.7, label="all-digit answers")
    ax.set_xlabel("step")
    ax.set_ylabel("fraction")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("sanity task: reward per step")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_bf16_mismatch(args: argparse.Namespace) -> dict:
    config = config_from_dict(
        {
            "run": {
                "output_dir": str(args.out / "bf16"),
                "steps": 2,
                "resume": False,
                "save_every": 10_000,
                "save_episodes": False,
                "progress": False,
            },
            "model": model_section(args, "bf16"),
            "rollout": {
                "backend": "hf",
                "batch_size": 256,
                "prompts_per_step": 8,
                "samples_per_prompt": 16,
                "turns": 1,
                "max_tokens": 64,
                "temperature": 1.0,
                "top_p": 1.0,
            },
            "task": {"kind": "sanity"},
            "algorithm": {"prs": False},
            "optim": {"lr": 1e-4, "micro_batch_rows": 128},
        }
    )
    history = train(config)
    out = {
        k: [m[k] for m in history]
        for k in ("mismatch/mean_abs_log_ratio", "mismatch/max_abs_log_ratio", "mismatch/rejected_fraction")
    }
    print(f"bf16 weights, KV-cached sampling vs one forward: {json.dumps(out)}", flush=True)
    return out


def run_kernel(args: argparse.Namespace) -> dict:
    config = config_from_dict(
        {
            "run": {
                "output_dir": str(args.out / "kernel"),
                "steps": args.kernel_steps,
                "resume": False,
                "save_every": args.kernel_steps,
                "progress": False,
            },
            "model": model_section(args),
            "rollout": {
                "backend": "hf",
                "batch_size": 64,
                "prompts_per_step": args.kernel_prompts,
                "samples_per_prompt": 2,
                "turns": 2,
                "max_tokens": 4096,
                "concurrency": 64,
            },
            "gym": {"kind": "in_process", "concurrency": 4, "pool_size": 4},
            "eval": {
                "device": args.device,
                "timing": args.device != "cpu",
                "profile": True,
                "trials": 5,
                "timeout_s": 300,
            },
            "task": {
                "kind": "kernel",
                "problems": "builtin",
                "replay_builtin": True,
                "levels": [1, 2],
                "include": args.kernel_include,
            },
            "optim": {"lr": 1e-5, "micro_batch_rows": 4},
        }
    )
    t0 = time.perf_counter()
    history = train(config)
    wall = time.perf_counter() - t0
    keys = (
        "reward/mean",
        "reward/max",
        "reward/correct_fraction",
        "gym/evaluations",
        "gym/eval_s_mean",
        "gym/coverage_mean",
        "gym/hack_rate",
        "loss/prs_rejected_fraction",
        "mismatch/rejected_fraction",
        "loss/loss",
        "loss/grad_norm",
        "perf/rollout_s",
        "perf/evals_per_s",
        "perf/update_s",
    )
    for i, m in enumerate(history, 1):
        fast = {k: round(v, 3) for k, v in m.items() if k.startswith("reward/fast@") and "/turn" not in k}
        print(
            f"kernel step {i}: " + "  ".join(f"{k}={m[k]:.4g}" for k in keys if k in m) + f"  {fast}",
            flush=True,
        )
    episodes = [
        json.loads(line) for line in (args.out / "kernel" / "episodes.jsonl").read_text().splitlines()
    ]
    speedups = [
        t["result"]["speedup"]
        for e in episodes
        for t in e["turns"]
        if t["result"] and t["result"].get("speedup") is not None
    ]
    coverages = [
        t["result"]["time_coverage"]
        for e in episodes
        for t in e["turns"]
        if t["result"] and t["result"].get("time_coverage") is not None
    ]
    rewards = [t["reward"] for e in episodes for t in e["turns"]]
    print(f"kernel: {len(speedups)} speedups measured {sorted(round(s, 2) for s in speedups)}", flush=True)
    print(f"kernel: time coverage {sorted(round(c, 2) for c in coverages)}", flush=True)
    evals = sum(m["gym/evaluations"] for m in history)
    check("kernel gym evaluations ran", evals > 0, f"{evals:.0f} evaluations")
    check(
        "kernel some turns correct",
        any(m["reward/correct_fraction"] > 0 for m in history),
        f"correct fractions {[round(m['reward/correct_fraction'], 3) for m in history]}",
    )
    on_cpu = "cpu: no timing" if args.device == "cpu" else ""
    check("kernel speedups measured on GPU", len(speedups) > 0, f"{len(speedups)} turns timed", skip=on_cpu)
    check("kernel time coverage measured", len(coverages) > 0, f"{len(coverages)} turns profiled", skip=on_cpu)
    check(
        "kernel rewards above 0.5 use speedup/coverage",
        any(r > 0.5 for r in rewards),
        f"max reward {max(rewards, default=0):.3f}",
        skip=on_cpu,
    )
    check("kernel loss finite", all(math.isfinite(m.get("loss/loss", 0.0)) for m in history), "")
    return {
        "wall_s": wall,
        "evaluations": evals,
        "evals_per_s": evals / sum(m["perf/rollout_s"] for m in history),
        "steps": [{k: m[k] for k in keys if k in m} for m in history],
        "speedups": speedups,
        "time_coverage": coverages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/train_gpu"))
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--sanity-steps", type=int, default=40)
    parser.add_argument("--sanity-lr", type=float, default=1e-3)
    parser.add_argument("--kernel-steps", type=int, default=2)
    parser.add_argument("--kernel-prompts", type=int, default=4)
    parser.add_argument(
        "--kernel-include", action="append", default=[], help="problem key substrings (default: all)"
    )
    parser.add_argument("--skip", action="append", default=[], choices=["sanity", "bf16", "kernel"])
    parser.add_argument(
        "--keep-checkpoints",
        action="store_true",
        help="keep each part's checkpoints (by default removed: hundreds of MB that no check reads)",
    )
    parser.add_argument(
        "--device", default="cuda", help="cuda, or cpu for a dry run (no timing: speedup checks fail)"
    )
    args = parser.parse_args()
    if args.device != "cpu" and not torch.cuda.is_available():
        print("CHECK cuda available: FAIL (no CUDA device)")
        sys.exit(1)
    args.out.mkdir(parents=True, exist_ok=True)
    import transformers
    import triton

    device_name = torch.cuda.get_device_name(0) if args.device != "cpu" else "cpu"
    report = {
        "device": device_name,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "triton": triton.__version__,
        "model": f"Llama {args.layers}x{args.hidden} (random init, vocab 512)",
    }
    print(json.dumps(report), flush=True)
    parts = {"sanity": run_sanity, "bf16": run_bf16_mismatch, "kernel": run_kernel}
    for name, fn in parts.items():
        if name in args.skip:
            continue
        try:
            report[name] = fn(args)
        except Exception as e:  # report and go on: one part failing must not hide the others' numbers
            import traceback

            traceback.print_exc()
            check(f"{name} ran", False, f"{type(e).__name__}: {e}")
        if not args.keep_checkpoints:
            shutil.rmtree(args.out / name / "checkpoints", ignore_errors=True)
    if "sanity" in report:
        r = report["sanity"]
        print(
            f"SUMMARY sanity: reward {r['step1']:.3f} (step 1) / {r['first5']:.3f} (first 5 steps) -> "
            f"{r['last5']:.3f} (last 5), "
            f"curve {[round(x, 2) for x in r['reward_mean']]}; generated tokens/s {r['gen_tokens_per_s_median']:.0f}, "
            f"trainer tokens/s {r['train_tokens_per_s_median']:.0f} (medians); {r['wall_s']:.0f} s"
        )
    if "bf16" in report:
        r = report["bf16"]
        print(
            f"SUMMARY bf16: mean |log ratio| {r['mismatch/mean_abs_log_ratio']}, max {r['mismatch/max_abs_log_ratio']}, "
            f"MRS rejected {r['mismatch/rejected_fraction']}"
        )
    if "kernel" in report:
        r = report["kernel"]
        print(
            f"SUMMARY kernel: {r['evaluations']:.0f} evaluations, {r['evals_per_s']:.2f} evaluations/s of rollout time, "
            f"rewards per step {[round(m['reward/mean'], 3) for m in r['steps']]}, "
            f"{len(r['speedups'])} speedups, {len(r['time_coverage'])} time coverages; {r['wall_s']:.0f} s"
        )
    report["checks"] = [{"name": n, "ok": ok, "detail": d} for n, ok, d in CHECKS]
    (args.out / "train_gpu.json").write_text(json.dumps(report, indent=2))
    failed = [n for n, ok, _ in CHECKS if not ok]
    print(
        f"train_gpu: {len(CHECKS) - len(failed)}/{len(CHECKS)} checks passed"
        + (f"; FAILED: {failed}" if failed else "")
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
