"""The Prometheus text exposition, checked by hand."""

from __future__ import annotations

from drkernel.service.metrics import Counter, Gauge, Histogram


def test_histogram_buckets_are_cumulative():
    h = Histogram("t_seconds", "doc", buckets=(0.1, 1.0))
    for x in (0.05, 0.1, 0.5, 3.0):
        h.observe(x)
    # le=0.1 holds 0.05 and 0.1 (bounds are inclusive); le=1 adds 0.5; +Inf adds 3.0
    assert list(h.render())[2:] == [
        't_seconds_bucket{le="0.1"} 2',
        't_seconds_bucket{le="1"} 3',
        't_seconds_bucket{le="+Inf"} 4',
        "t_seconds_sum 3.65",
        "t_seconds_count 4",
    ]


def test_counter_labels_escaped_and_gauge_read_at_scrape():
    c = Counter("t_total", "doc", ("error_class",))
    c.inc(error_class='a"b')
    c.inc(2, error_class='a"b')
    assert list(c.render())[-1] == 't_total{error_class="a\\"b"} 3'
    state = {"ready": 1}
    g = Gauge("t_workers", "doc", ("state",), lambda: {(k,): v for k, v in state.items()})
    state["ready"] = 2
    assert list(g.render())[-1] == 't_workers{state="ready"} 2'


def test_unhandled_exception_is_counted_as_a_500():
    """The timing middleware is outermost: a route that raises past every handler still lands in
    the responses counter as a 500 under its route template."""
    import asyncio

    import httpx
    from starlette.applications import Starlette
    from starlette.routing import Route

    from drkernel.service.app import _Timed
    from drkernel.service.metrics import ServiceMetrics

    async def boom(request):
        raise RuntimeError("bug")

    inner = Starlette(routes=[Route("/v1/boom/{x}", boom)])
    metrics = ServiceMetrics()
    app = _Timed(inner, metrics=metrics, routes=inner.router.routes)

    async def call():
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return (await c.get("/v1/boom/1")).status_code, (await c.get("/nowhere")).status_code

    assert asyncio.run(call()) == (500, 404)
    assert metrics.http_responses.value(route="/v1/boom/{x}", method="GET", status="500") == 1
    assert metrics.http_responses.value(route="unmatched", method="GET", status="404") == 1
