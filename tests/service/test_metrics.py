"""The Prometheus text exposition, checked by hand."""

from __future__ import annotations

from drkernel.service.metrics import Counter, Gauge, Histogram


def test_histogram_buckets_are_cumulative():
    h = Histogram("t_seconds", "doc", buckets=(0.1, 1.0))
    for x in (0.05, 0.1, 0.5, 3.0):
        h.observe(x)
    # le=0.1 holds 0.05 and 0.1 (bounds are inclusive); le=1 adds 0.5; +Inf adds 3.0
    assert list(h.render())[2:] == ['t_seconds_bucket{le="0.1"} 2', 't_seconds_bucket{le="1"} 3',
                                    't_seconds_bucket{le="+Inf"} 4', "t_seconds_sum 3.65", "t_seconds_count 4"]


def test_counter_labels_escaped_and_gauge_read_at_scrape():
    c = Counter("t_total", "doc", ("error_class",))
    c.inc(error_class='a"b')
    c.inc(2, error_class='a"b')
    assert list(c.render())[-1] == 't_total{error_class="a\\"b"} 3'
    state = {"ready": 1}
    g = Gauge("t_workers", "doc", ("state",), lambda: {(k,): v for k, v in state.items()})
    state["ready"] = 2
    assert list(g.render())[-1] == 't_workers{state="ready"} 2'
