"""Data parallel on one machine: N ranks, each holding the whole policy, train as one.

Launch (rank r of N sees ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``)::

    torchrun --standalone --nproc-per-node N -m drkernel train --config x.yaml
    drkernel train --config x.yaml --nproc N        # spawns the N workers itself (:func:`launch`)

Process group: ``nccl`` when the policy is on CUDA (rank r trains on ``cuda:<local rank>``), ``gloo`` on
CPU. A run with ``WORLD_SIZE`` 1 or unset is the plain single-process trainer. Devices (:func:`localize`):
``auto`` / ``cuda`` for ``model.device`` and, with the in-process gym, ``eval.device`` become
``cuda:<local rank>``, so each rank's gym evaluates the rollouts on that rank's own GPU (its judges and
candidates start there; ``EvalResult.device`` records it); one GPU named for several ranks is an error.

How the work is split (one step):

- Rollout: whole prompt groups per rank. The step's ``prompts_per_step`` prompts are those a single
  process would pick; rank r takes the r-th contiguous share (``prompts_per_step`` must divide by N)
  and samples all ``samples_per_prompt`` trajectories of its prompts. TRLOO / GRPO baselines are
  taken within a (prompt, turn) group, so every advantage is the one a single process computes.
- Update: each rank's loss is scaled by its rows' share of the global mini-batch (rows, or tokens
  for ``token-mean``, summed across ranks) and the gradients are summed across ranks (bucketed
  ``all_reduce``) before clipping and the optimizer step. That is the gradient of the whole batch, the
  step a single process would take on it (up to float summation order); LoRA adapters the same way.
  An ``all_reduce`` leaves the same bits on every rank, so the ranks' AdamW steps and weights stay
  identical; a fingerprint of the weights is compared after every update all the same (the trainer
  keeps the last one, ``Trainer.weights_fingerprint``, for benchmarks to record per rank).
- Metrics: see :func:`reduce_metrics`. Rank 0 alone writes ``config.json``, ``metrics.jsonl``,
  ``episodes.jsonl`` (every rank's episodes) and checkpoints, and pushes weights to an ``openai``
  server (the other ranks wait for it); every rank resumes from the same checkpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import socket
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch

from drkernel.devices import Device
from drkernel.errors import ConfigError, InfrastructureError
from drkernel.rl.config import TrainConfig

log = logging.getLogger(__name__)

BUCKET_ELEMENTS = 1 << 25
"""Gradients are all-reduced in flat buckets of at most this many elements (128 MiB in fp32)."""

SUMMED = frozenset(
    {
        "loss/rows",
        "loss/rows_in_loss",
        "gym/evaluations",
        "perf/completion_tokens",
        "perf/train_tokens",
        "perf/evaluations",
    }
)
"""Step metrics that are counts: summed over ranks."""


@dataclass(frozen=True)
class DistContext:
    """This process's place in the run; ``world_size`` 1 is a single process (every call a no-op)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False
    """The process group was created here (and is destroyed by :meth:`close`)."""

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def seed(self, base: int) -> int:
        """A seed of its own per rank; ``base`` itself in a single process (so runs stay comparable)."""
        return base * self.world_size + self.rank

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier()

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj)
        return out

    def reduce_scalar(self, value: float, op: str = "sum") -> float:
        """``value`` summed (``sum``) or maximised (``max``) over ranks."""
        if not self.enabled:
            return value
        return (sum if op == "sum" else max)(self.gather(value))

    def sum_metrics(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """Per-key sums over ranks (a rank without a key adds 0): for loss statistics already weighted by
        each rank's share of the global mini-batch."""
        if not self.enabled:
            return dict(metrics)
        out: dict[str, float] = {}
        for part in self.gather(dict(metrics)):
            for k, v in part.items():
                out[k] = out.get(k, 0.0) + v
        return out

    def all_reduce_grads(self, params: Iterable[torch.nn.Parameter]) -> None:
        """Sum the gradients of ``params`` over ranks in place, in flat buckets per dtype and device.
        A parameter without a gradient here (no rows on this rank) contributes zeros."""
        if not self.enabled:
            return
        buckets: dict[tuple[torch.dtype, torch.device], list[list[torch.Tensor]]] = {}
        for p in params:
            if not p.requires_grad:
                continue
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            lists = buckets.setdefault((p.grad.dtype, p.grad.device), [[]])
            if lists[-1] and sum(g.numel() for g in lists[-1]) + p.grad.numel() > BUCKET_ELEMENTS:
                lists.append([])
            lists[-1].append(p.grad)
        for lists in buckets.values():
            for grads in lists:
                flat = torch.cat([g.reshape(-1) for g in grads])  # (sum of numels,)
                torch.distributed.all_reduce(flat)
                offset = 0
                for g in grads:
                    g.copy_(flat[offset : offset + g.numel()].view_as(g))
                    offset += g.numel()

    def check_same_weights(self, model: Any) -> str:
        """Raise :class:`InfrastructureError` when this rank's weights differ from rank 0's (compared by a
        float64 sum and absolute sum per tensor: equal bits give equal fingerprints). Returns the
        fingerprint as a short hex digest (the same on every rank once checked); ``""`` in a single
        process, which has nothing to compare."""
        if not self.enabled:
            return ""
        names, prints = [], []
        with torch.no_grad():
            for name, p in model.named_parameters():
                t = p.detach().double()
                names.append(name)
                prints.append(torch.stack([t.sum(), t.abs().sum()]))
        mine = torch.stack(prints).cpu()  # (P, 2)
        reference = self.gather(mine)[0]
        if not torch.equal(mine, reference):
            first = names[int((mine != reference).any(dim=1).nonzero()[0])]
            raise InfrastructureError(
                f"rank {self.rank}'s weights differ from rank 0's (first at {first}): ranks diverged"
            )
        return hashlib.sha256(mine.numpy().tobytes()).hexdigest()[:16]

    def close(self) -> None:
        if self.owns_group and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def share(items: Sequence[Any], rank: int, world_size: int) -> list[Any]:
    """Rank ``rank``'s contiguous share of ``items`` (whose length divides by ``world_size``)."""
    size = len(items) // world_size
    return list(items[rank * size : (rank + 1) * size])


def _rank_device(name: str, local_rank: int, world_size: int, field: str) -> str:
    """``auto`` / ``cuda`` become this rank's GPU when CUDA is there (`Device.for_rank`)."""
    return str(Device.parse(name, field).for_rank(local_rank, world_size, field))


def check_config(config: TrainConfig, world_size: int) -> None:
    """Raise ConfigError listing every setting that cannot run on ``world_size`` ranks."""
    if world_size == 1:
        return
    problems = []
    ppr = config.rollout.prompts_per_step
    if ppr % world_size:
        problems.append(
            f"rollout.prompts_per_step={ppr} does not divide among {world_size} ranks "
            f"(whole prompt groups per rank)"
        )
    if config.rollout.backend == "vllm":
        problems.append(
            "rollout.backend='vllm' runs an engine inside each trainer process; with several ranks "
            "use 'openai' (one server for all ranks) or 'hf'"
        )
    if config.rollout.device:
        problems.append(
            f"rollout.device={config.rollout.device!r} would put every rank's rollout copy on one device"
        )
    if problems:
        raise ConfigError(f"invalid train config for {world_size} ranks: " + "; ".join(problems))


def localize(config: TrainConfig, ctx: DistContext) -> TrainConfig:
    """``config`` for this rank: ``auto`` / ``cuda`` model and in-process gym (``eval.device``) devices
    become its GPU (the settings were checked by :func:`init_from_env`)."""
    model = dataclasses.replace(
        config.model,
        device=_rank_device(config.model.device, ctx.local_rank, ctx.world_size, "model.device"),
    )
    evaluation = config.eval
    if config.gym.kind == "in_process":
        evaluation = evaluation.replace(
            device=_rank_device(evaluation.device, ctx.local_rank, ctx.world_size, "eval.device")
        )
    return dataclasses.replace(config, model=model, eval=evaluation)


def init_from_env(config: TrainConfig) -> DistContext:
    """This process's :class:`DistContext` from torchrun's variables; joins (or creates) the process
    group when ``WORLD_SIZE`` > 1."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return DistContext()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    check_config(config, world_size)
    owns = not torch.distributed.is_initialized()
    if owns:
        cuda = config.model.device != "cpu" and torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(local_rank)
        torch.distributed.init_process_group("nccl" if cuda else "gloo")
    log.info("rank %d of %d (local rank %d)", rank, world_size, local_rank)
    return DistContext(rank, world_size, local_rank, owns)


def reduce_metrics(ctx: DistContext, metrics: Mapping[str, float], weight: float) -> dict[str, float]:
    """One step's metrics over all ranks; ``weight`` is this rank's row count.

    Counts (:data:`SUMMED`) are summed; ``perf/*_s`` times and ``max`` statistics take the largest
    value (the step waits for the slowest rank); ``min`` statistics the smallest; everything else is a
    mean weighted by rows, which is exact for per-row fractions and means (a rank without a
    ``gym/outcome/`` key had no such outcome, 0) and weights per-token means (mismatch) by rows.
    """
    if not ctx.enabled:
        return dict(metrics)
    parts = ctx.gather((dict(metrics), float(weight)))
    keys = sorted({k for part, _ in parts for k in part})
    out = {}
    for key in keys:
        last = key.rsplit("/", 1)[-1]
        pairs = [
            (part.get(key, 0.0), w) for part, w in parts if key in part or key.startswith("gym/outcome/")
        ]
        values = [v for v, _ in pairs]
        if key in SUMMED:
            out[key] = sum(values)
        elif (key.startswith("perf/") and key.endswith("_s")) or last == "max" or last.startswith("max_"):
            out[key] = max(values)
        elif last == "min" or last.startswith("min_"):
            out[key] = min(values)
        else:
            total = sum(w for _, w in pairs)
            out[key] = sum(v * w for v, w in pairs) / total if total else sum(values) / len(values)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(
    rank: int, fn: Callable[[TrainConfig], Any], config: TrainConfig, nproc: int, port: int, level: int
) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    logging.basicConfig(level=level, format=f"[rank {rank}] %(levelname)s %(name)s: %(message)s")
    if config.model.device == "cpu" or not torch.cuda.is_available():
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // nproc))  # the ranks share the cores
    fn(config)


def launch(
    fn: Callable[[TrainConfig], Any], config: TrainConfig, nproc: int, log_level: int = logging.WARNING
) -> None:
    """Run ``fn(config)`` on ``nproc`` spawned ranks of one process group (as torchrun would) and wait.
    ``fn`` must be importable by name (a module-level function). A failing rank stops the others and
    raises :class:`InfrastructureError` carrying its traceback."""
    check_config(config, nproc)
    if "WORLD_SIZE" in os.environ:
        raise ConfigError("already inside a distributed launch (WORLD_SIZE is set): drop --nproc")
    import torch.multiprocessing as mp

    try:
        mp.start_processes(
            _worker,
            args=(fn, config, nproc, _free_port(), log_level),
            nprocs=nproc,
            join=True,
            start_method="spawn",
        )
    except mp.ProcessRaisedException as e:
        raise InfrastructureError(f"a training rank failed:\n{e}") from e
    except mp.ProcessExitedException as e:
        raise InfrastructureError(f"a training rank exited: {e}") from e
