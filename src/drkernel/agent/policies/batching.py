"""Gather concurrent single-conversation requests into batches for a blocking batch generator.

Episodes run concurrently and each asks for one completion at a time; a local engine is fastest
when it generates many at once. Requests queue up while a batch runs in a worker thread; the next
batch takes up to ``batch_size`` queued requests that share sampling parameters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from drkernel.agent.policies.base import Completion, Message, SamplingParams

BatchFn = Callable[[Sequence[Sequence[Message]], SamplingParams], list[Completion]]


@dataclass
class _Pending:
    messages: Sequence[Message]
    params: SamplingParams
    future: asyncio.Future


class MicroBatcher:
    def __init__(self, fn: BatchFn, batch_size: int) -> None:
        self.fn, self.batch_size = fn, batch_size
        self._queue: list[_Pending] = []
        self._worker: asyncio.Task | None = None
        self.batches: list[int] = []  # sizes of the batches run, for inspection

    async def _drain(self) -> None:
        while self._queue:
            head = self._queue[0].params
            take = [p for p in self._queue if p.params == head][: self.batch_size]
            self._queue = [p for p in self._queue if all(p is not t for t in take)]
            self.batches.append(len(take))
            try:
                outs = await asyncio.to_thread(self.fn, [p.messages for p in take], head)
            except Exception as e:  # noqa: BLE001 - a failed batch fails its callers, not the worker
                for p in take:
                    p.future.set_exception(e)
                continue
            for p, c in zip(take, outs):
                p.future.set_result(c)
        self._worker = None

    async def submit(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        loop = asyncio.get_running_loop()
        pending = [_Pending(m, params, loop.create_future()) for m in batch]
        self._queue.extend(pending)
        await asyncio.sleep(0)  # let concurrent callers enqueue before the batch is cut
        if self._worker is None:
            self._worker = asyncio.create_task(self._drain())
        return list(await asyncio.gather(*(p.future for p in pending)))

    async def wait(self) -> None:
        if self._worker is not None:
            await self._worker
