"""Device workers as Ray actors: one actor per GPU of the cluster (any number of nodes), plus any
number of CPU interpreter workers, behind the same `WorkerHandle` interface as local processes.

An actor holds one evaluator (the gym's judge and candidate pool on its GPU). A dead actor (its node
lost, its process killed) fails its in-flight calls with `InfrastructureError`, like a local worker.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any, Mapping

from drkernel.errors import ConfigError, InfrastructureError
from drkernel.service.config import ServiceConfig
from drkernel.service.workers import (
    JobThreads,
    WorkerUnavailable,
    answer_error,
    start_evaluator,
    worker_host_memory,
)


class _EvaluatorActor:
    """The actor body (wrapped with ``ray.remote`` at placement time). Its host memory
    (`worker_host_memory`) is read on the node it runs on."""

    def __init__(self, spec: str, device: str, kwargs: Mapping[str, Any] | None, slots: int,
                 memory: tuple[int | None, int | None]):
        host_memory = worker_host_memory(device, *memory)
        self.evaluator, self._info = start_evaluator(spec, device, kwargs, slots, host_memory)
        self.device = device
        self.threads = JobThreads()

    def info(self) -> dict[str, Any]:
        return {
            **self._info,
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }

    def evaluate(self, request_json: str, job_id: str = "") -> tuple[str, str]:
        return self.threads.run(self.evaluator, request_json, job_id or os.urandom(8).hex())

    def cancel(self, job_id: str) -> None:
        self.threads.cancel(self.evaluator, job_id)


class RayWorker:
    """A `WorkerHandle` backed by a Ray actor (``gpu``: one whole GPU, else one CPU)."""

    def __init__(self, name: str, gpu: bool, spec: str, kwargs: Mapping[str, Any] | None, slots: int,
                 memory: tuple[int | None, int | None] = (None, None)):
        self.name, self.gpu, self.spec, self.slots = name, gpu, spec, slots
        self.memory = memory  # (ServiceConfig.host_memory_bytes, device_memory_bytes): `worker_host_memory`
        self.device = "cuda:0" if gpu else "cpu"  # Ray narrows CUDA_VISIBLE_DEVICES to the actor's GPU
        self.kwargs = dict(kwargs or {})
        self._actor = None
        self._info: dict[str, Any] = {}
        self._dead = False

    async def start(self) -> dict[str, Any]:
        import ray

        options = {"num_gpus": 1, "num_cpus": 1} if self.gpu else {"num_cpus": 1}
        # one thread more than slots: a cancel never waits behind the jobs it is meant to stop
        actor_cls = ray.remote(**options, max_concurrency=self.slots + 1)(_EvaluatorActor)
        self._actor = actor_cls.remote(self.spec, self.device, self.kwargs, self.slots, self.memory)
        self._dead = False
        try:
            self._info = await self._actor.info.remote()
        except ray.exceptions.RayError as e:
            self._dead = True
            raise InfrastructureError(f"Ray worker {self.name} failed to start: {e}") from e
        return self._info

    async def evaluate(self, request_json: str, job_id: str = "") -> str:
        import ray

        if self._actor is None or self._dead:
            raise WorkerUnavailable(f"Ray worker {self.name} is not running")
        try:
            kind, payload = await self._actor.evaluate.remote(request_json, job_id)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError) as e:
            self._dead = True
            raise InfrastructureError(f"Ray worker {self.name} lost: {type(e).__name__}") from e
        except ray.exceptions.RayError as e:
            raise InfrastructureError(f"Ray worker {self.name} call failed: {e}") from e
        if kind != "result":
            raise answer_error(self.name, kind, payload)
        return payload

    async def cancel(self, job_id: str) -> None:
        if self._actor is not None and not self._dead:
            await self._actor.cancel.remote(job_id)

    @property
    def alive(self) -> bool:
        return self._actor is not None and not self._dead

    def kill(self) -> None:
        import ray

        if self._actor is not None:
            ray.kill(self._actor, no_restart=True)
            self._dead = True

    async def stop(self) -> None:
        self.kill()
        await asyncio.sleep(0)

    def describe(self) -> dict[str, Any]:
        return {"backend": "ray", "pid": self._info.get("pid"), "host": self._info.get("host")}


def ray_workers(config: ServiceConfig) -> list[RayWorker]:
    """Connect to the cluster (unless this process already did) and plan one worker per GPU plus
    ``config.ray_cpu_workers`` CPU workers."""
    import ray

    if not ray.is_initialized():
        address = None if config.ray_address == "local" else config.ray_address
        ray.init(address=address, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    memory = (config.host_memory_bytes, config.device_memory_bytes)
    workers = [
        RayWorker(f"ray-gpu-{i}", True, config.evaluator, config.evaluator_kwargs, config.slots_per_worker,
                  memory)
        for i in range(gpus)
    ]
    workers += [
        RayWorker(f"ray-cpu-{i}", False, config.evaluator, config.evaluator_kwargs, config.slots_per_worker,
                  memory)
        for i in range(config.ray_cpu_workers)
    ]
    if not workers:
        raise ConfigError(
            f"Ray cluster {config.ray_address!r} has no GPU and ray_cpu_workers=0: nothing to run on"
        )
    return workers
