"""Prometheus metrics in the text exposition format, standard library only (the worker layer runs
on GPU hosts that have nothing but torch and triton). Names are prefixed ``kernelgym_``."""

from __future__ import annotations

import bisect
import math
import threading
from typing import Callable, Iterable

LATENCY_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)


def _labels(names: tuple[str, ...], values: tuple[str, ...], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


class Counter:
    def __init__(self, name: str, doc: str, labels: tuple[str, ...] = ()):
        self.name, self.doc, self.label_names = name, doc, labels
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(str(labels[n]) for n in self.label_names)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        return self._values.get(tuple(str(labels[n]) for n in self.label_names), 0.0)

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.doc}"
        yield f"# TYPE {self.name} counter"
        with self._lock:
            items = sorted(self._values.items())
        for key, v in items:
            yield f"{self.name}{_labels(self.label_names, key)} {_fmt(v)}"


class Histogram:
    """A histogram, optionally by labels (one series of buckets per label values)."""

    def __init__(
        self, name: str, doc: str, buckets: tuple[float, ...] = LATENCY_BUCKETS, labels: tuple[str, ...] = ()
    ):
        self.name, self.doc, self.buckets, self.label_names = name, doc, tuple(buckets), labels
        self._series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}
        self._lock = threading.Lock()

    def observe(self, x: float, **labels: str) -> None:
        key = tuple(str(labels[n]) for n in self.label_names)
        with self._lock:
            counts, total = self._series.setdefault(key, ([0] * (len(self.buckets) + 1), [0.0]))
            counts[bisect.bisect_left(self.buckets, x)] += 1
            total[0] += x

    @property
    def count(self) -> int:
        with self._lock:
            return sum(sum(c) for c, _ in self._series.values())

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.doc}"
        yield f"# TYPE {self.name} histogram"
        with self._lock:
            series = sorted((k, list(c), t[0]) for k, (c, t) in self._series.items())
        for key, counts, total in series:
            cum = 0
            for le, c in zip(self.buckets + (math.inf,), counts):
                cum += c
                le_label = 'le="' + _fmt(le) + '"'
                yield f"{self.name}_bucket{_labels(self.label_names, key, le_label)} {cum}"
            yield f"{self.name}_sum{_labels(self.label_names, key)} {_fmt(total)}"
            yield f"{self.name}_count{_labels(self.label_names, key)} {cum}"


class Gauge:
    """A gauge read at scrape time from a callback returning ``{label_values: value}``."""

    def __init__(
        self, name: str, doc: str, labels: tuple[str, ...], read: Callable[[], dict[tuple[str, ...], float]]
    ):
        self.name, self.doc, self.label_names, self.read = name, doc, labels, read

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.doc}"
        yield f"# TYPE {self.name} gauge"
        for key, v in sorted(self.read().items()):
            yield f"{self.name}{_labels(self.label_names, key)} {_fmt(v)}"


class ServiceMetrics:
    """Every metric the service exports. Gauges are attached by the app (they read live state)."""

    def __init__(self) -> None:
        self.submitted = Counter(
            "kernelgym_jobs_submitted_total", "Jobs accepted (idempotent repeats excluded)."
        )
        self.finished = Counter(
            "kernelgym_jobs_finished_total", "Jobs that reached a terminal state.", ("outcome",)
        )
        self.results = Counter(
            "kernelgym_eval_results_total", "Evaluation results by solution status.", ("status",)
        )
        self.cache_hits = Counter(
            "kernelgym_cache_hits_total",
            "Jobs answered without an evaluation: by content-hash cache at submission, "
            "or coalesced with a running duplicate.",
            ("kind",),
        )
        self.errors = Counter(
            "kernelgym_errors_total", "Infrastructure errors by class (retried once).", ("error_class",)
        )
        self.canary = Counter("kernelgym_canary_total", "Canary evaluations by outcome.", ("outcome",))
        self.preempted = Counter(
            "kernelgym_jobs_preempted_total",
            "Running jobs given back to the queue (attempt uncounted) so a waiting client gets its share "
            "of a worker's slots.",
        )
        self.job_latency = Histogram("kernelgym_job_latency_seconds", "Submission to terminal state.")
        self.eval_seconds = Histogram("kernelgym_eval_seconds", "Time a worker spent on one evaluation.")
        http = ("route", "method", "status")
        self.http_seconds = Histogram(
            "kernelgym_http_request_seconds", "API request handling time (long polls apart).", labels=http
        )
        self.long_poll_seconds = Histogram(
            "kernelgym_http_long_poll_seconds", "Time long-poll requests were held open.", labels=http
        )
        self.http_responses = Counter(
            "kernelgym_http_responses_total", "API responses by route, method and status.", http
        )
        self.gauges: list[Gauge] = []

    def render(self) -> str:
        lines: list[str] = []
        for m in (
            self.submitted,
            self.finished,
            self.results,
            self.cache_hits,
            self.errors,
            self.canary,
            self.preempted,
            self.job_latency,
            self.eval_seconds,
            self.http_seconds,
            self.long_poll_seconds,
            self.http_responses,
            *self.gauges,
        ):
            lines.extend(m.render())
        return "\n".join(lines) + "\n"
