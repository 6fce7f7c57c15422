"""Benchmark runs over problem sets: Fast@p metrics, trajectories on disk, reports with plots.

``metrics`` and ``io`` import only the standard library (and the agent's dataclasses); ``report``
imports matplotlib and ``io.write_parquet`` pyarrow when called.
"""

from drkernel.bench.metrics import PS, SampleRecord, records_from_episodes, summarize
from drkernel.bench.run import BenchConfig, run_bench

__all__ = [
    "PS",
    "BenchConfig",
    "SampleRecord",
    "records_from_episodes",
    "run_bench",
    "summarize",
]
