"""A small SVG line-chart writer (the GPU machine has no plotting library; this needs none)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Sequence


@dataclass(frozen=True)
class Series:
    label: str
    color: str
    ys: Sequence[float]
    dashed: bool = False


@dataclass(frozen=True)
class Panel:
    title: str
    series: Sequence[Series]


W, H, PAD = 330, 220, 36


def _panel(panel: Panel, x0: float, y0: float) -> list[str]:
    values = [v for s in panel.series for v in s.ys if math.isfinite(v)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    lo, hi = min(lo, 0.0), max(hi, lo + 1e-6)
    n = max((len(s.ys) for s in panel.series), default=1)
    sx = (W - 2 * PAD) / max(n - 1, 1)
    sy = (H - 2 * PAD) / (hi - lo)
    out = [f'<rect x="{x0 + PAD}" y="{y0 + PAD}" width="{W - 2 * PAD}" height="{H - 2 * PAD}" fill="none" '
           f'stroke="#999"/>',
           f'<text x="{x0 + W / 2}" y="{y0 + 20}" text-anchor="middle" font-size="13">'
           f'{escape(panel.title)}</text>',
           f'<text x="{x0 + 4}" y="{y0 + PAD + 4}" font-size="10">{hi:.2f}</text>',
           f'<text x="{x0 + 4}" y="{y0 + H - PAD}" font-size="10">{lo:.2f}</text>',
           f'<text x="{x0 + W / 2}" y="{y0 + H - 8}" text-anchor="middle" font-size="10">'
           f'step (1..{n})</text>']
    for s in panel.series:
        pts = [(x0 + PAD + i * sx, y0 + H - PAD - (v - lo) * sy)
               for i, v in enumerate(s.ys) if math.isfinite(v)]
        if not pts:
            continue
        dash = ' stroke-dasharray="4 3"' if s.dashed else ""
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="1.6"{dash}>'
                   f'<title>{escape(s.label)}</title></polyline>')
    return out


def chart(panels: Sequence[Panel], columns: int = 3, legend: Sequence[tuple[str, str]] = ()) -> str:
    """Panels in a grid, a legend of (label, color) below."""
    rows = math.ceil(len(panels) / columns)
    height = rows * H + 30
    body = []
    for k, p in enumerate(panels):
        body += _panel(p, (k % columns) * W, (k // columns) * H)
    for k, (label, color) in enumerate(legend):
        x = 10 + k * 150
        body.append(f'<line x1="{x}" y1="{height - 12}" x2="{x + 24}" y2="{height - 12}" stroke="{color}" '
                    f'stroke-width="3"/><text x="{x + 30}" y="{height - 8}" font-size="12">'
                    f'{escape(label)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{columns * W}" height="{height}" '
            f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n'
            + "\n".join(body) + "\n</svg>\n")
