"""Learning sanity on CPU: the trainer raises the mean format reward of a random-init tiny model.

Runs ``configs/train/sanity_cpu.yaml`` (a 2-layer, 64-wide Llama built locally; 8 prompts x 8
samples per step; reward = share of digit characters in the answer; TRLOO + PPO clip + MRS) and
writes the reward curve as JSON and PNG.

Run: ``PYTHONPATH=src python benchmarks/train_sanity.py --out out/train_sanity``.
"""

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from drkernel.rl.config import load_config
from drkernel.tasks import train

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "train" / "sanity_cpu.yaml"


def plot(history: list[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = range(1, len(history) + 1)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, [m["reward/mean"] for m in history], marker=".", label="mean reward (digit share)")
    ax.plot(steps, [m["reward/format_exact"] for m in history], marker=".", label="answers all digits")
    ax.set_xlabel("step")
    ax.set_ylabel("fraction")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/train_sanity"))
    parser.add_argument("--steps", type=int, default=None, help="override run.steps")
    parser.add_argument("--set", action="append", default=[], help="config override section.key=value")
    args = parser.parse_args()
    overrides = [f"run.output_dir={args.out / 'run'}", "run.resume=false", *args.set]
    if args.steps:
        overrides.append(f"run.steps={args.steps}")
    config = load_config(CONFIG, overrides)
    t0 = time.perf_counter()
    history = train(config)
    wall = time.perf_counter() - t0
    rewards = [m["reward/mean"] for m in history]
    result = {
        "config": str(CONFIG.name),
        "steps": len(history),
        "wall_s": wall,
        "device": f"cpu ({torch.get_num_threads()} threads, {platform.processor() or platform.machine()})",
        "date": time.strftime("%Y-%m-%d"),
        "reward_mean": rewards,
        "format_exact": [m["reward/format_exact"] for m in history],
        "first5_mean": sum(rewards[:5]) / min(5, len(rewards)),
        "last5_mean": sum(rewards[-5:]) / min(5, len(rewards)),
        "tokens_per_s": sum(m["perf/completion_tokens"] for m in history)
        / sum(m["perf/rollout_s"] for m in history),
        "step_s_median": sorted(m["perf/step_s"] for m in history)[len(history) // 2],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "train_sanity.json").write_text(json.dumps(result, indent=2))
    plot(
        history,
        args.out / "train_sanity.png",
        f"Learning sanity: tiny model from scratch, {len(history)} steps, {wall:.0f} s on CPU",
    )
    print(
        f"steps {len(history)}  wall {wall:.0f} s  mean reward first 5 steps {result['first5_mean']:.3f} -> "
        f"last 5 steps {result['last5_mean']:.3f}  rollout tokens/s {result['tokens_per_s']:.0f}"
    )
    print(f"wrote {args.out / 'train_sanity.json'} and {args.out / 'train_sanity.png'}")


if __name__ == "__main__":
    main()
