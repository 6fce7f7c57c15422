"""KernelGym as a service: a durable SQLite job queue and per-device gym workers behind a FastAPI app.

    store.py      JobStore (SQLite WAL): atomic claims with leases, attempts, idempotency, result cache
    scheduler.py  Scheduler: claims jobs for workers by free slots and device memory, retries our own
                  failures once, canaries devices
    workers.py    LocalWorker (one process per device) and the WorkerHandle protocol
    ray_backend.py RayWorker: the same handle as a Ray actor (one per GPU, any number of nodes)
    app.py        create_app(config): the /v1 HTTP API
    client.py     ServiceClient, AsyncServiceClient, ServiceEvaluator (the gym's Evaluator protocol)

Importing this package loads nothing heavy; the web stack is imported by ``app`` and ``client`` only.
"""

from drkernel.service.config import ServiceConfig

__all__ = ["ServiceConfig"]
