"""The one gym factory: where evaluations run, from a place and a device."""

from __future__ import annotations

import os
from typing import Any

from drkernel.errors import ConfigError
from drkernel.gym.protocol import Evaluator

TOKEN_ENV = "KERNELGYM_TOKEN"


def make_evaluator(where: str = "local", device: str = "auto", concurrency: int = 4, *, pool_size: int = 2,
                   unsafe_no_sandbox: bool = False, checks: Any = None) -> Evaluator:
    """``local`` -> the in-process gym on ``device`` (``checks``: a `CheckRegistry`, default the full
    checks), behind the CUDA front that judges ``language: cuda`` requests; an ``http(s)://`` URL -> the
    KernelGym service client (bearer token from ``KERNELGYM_TOKEN`` when set)."""
    if where == "local":
        from drkernel.gym import InProcessEvaluator
        from drkernel.gym.cuda.evaluate import with_languages

        inner = InProcessEvaluator(device=device, concurrency=concurrency, pool_size=pool_size,
                                   unsafe_no_sandbox=unsafe_no_sandbox, checks=checks)
        return with_languages(inner, device, unsafe_no_sandbox)  # language cuda: drkernel.gym.cuda
    if where.startswith(("http://", "https://")):
        try:
            from drkernel.service.client import ServiceEvaluator
        except ImportError as e:
            raise ConfigError(
                f"evaluator {where!r} needs the service client: pip install 'drkernel[service]' ({e})"
            ) from e
        return ServiceEvaluator(where, token=os.environ.get(TOKEN_ENV))
    raise ConfigError(f"evaluator {where!r}: expected 'local' or a service URL (http://host:port)")


def train_evaluator(config: Any) -> Evaluator:
    """The gym of a `TrainConfig`'s ``gym`` section: the service at ``gym.url``, or in process on
    ``eval.device`` (in the OS sandbox unless ``gym.unsafe_no_sandbox``)."""
    from drkernel.rl.config import GymKind

    g = config.gym
    where = g.url if g.kind == GymKind.SERVICE else "local"
    return make_evaluator(where, config.eval.device, g.concurrency, pool_size=g.pool_size,
                          unsafe_no_sandbox=g.unsafe_no_sandbox)
