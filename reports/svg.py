"""Small inline-SVG charts for the HTML reports (no plotting library, no JavaScript).

A line chart is one or more series over x = 1..n (queries, epochs), each a mean line with
optional shaded bands (spread over images), drawn with nice axis ticks and a legend to the
right; a bar chart is one group of bars per category (subset), one bar per series.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

# Tableau 10: distinct, print-friendly, colour-blind-aware enough for a handful of attacks.
SERIES_COLOURS = ("#4e79a7", "#e15759", "#f28e2b", "#76b7b2", "#59a14f", "#edc948",
                  "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


@dataclass
class Series:
    label: str
    y: list[float]
    colour: str = SERIES_COLOURS[0]
    bands: tuple[tuple[list[float], list[float]], ...] = ()  # (lower, upper), widest first
    width: float = 1.8
    markers: bool = False  # a dot per point (few points, e.g. epochs)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (steps of 1, 2, 2.5 or 5 times a power of ten)."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0, 1.0]
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    raw = (hi - lo) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(lo / step + 1e-9) * step
    ticks, v = [], start
    while v < hi + step * 0.999:
        ticks.append(round(v, 10))
        v += step
    return ticks


def _fmt(v: float) -> str:
    return f"{v:g}" if abs(v) >= 1e-9 else "0"


def _frame(width: int, height: int, title: str, ylabel: str, left: float, pw: float,
           yticks: list[float], py: Callable[[float], float]) -> list[str]:
    """The opening of a chart: the svg element, its title and the y grid with its labels."""
    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{escape(title or ylabel)}" xmlns="http://www.w3.org/2000/svg">']
    if title:
        out.append(f'<text x="{left}" y="18" class="ct">{escape(title)}</text>')
    for t in yticks:
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="cg"/>'
                   f'<text x="{left - 8}" y="{py(t) + 4:.1f}" text-anchor="end" class="cl">{_fmt(t)}</text>')
    return out


def line_chart(series: list[Series], *, xlabel: str, ylabel: str, title: str = "",
               width: int = 720, height: int = 330, unit: str = "queries") -> str:
    """An SVG element (string) that scales to its container's width; `unit` names x in the
    lines' tooltips ("…: 71.2 after 6 queries")."""
    left, right, top, bottom = 58, 150, 30 if title else 14, 44
    pw, ph = width - left - right, height - top - bottom
    n = max((len(s.y) for s in series), default=1)
    values = [v for s in series for v in s.y]
    values += [v for s in series for band in s.bands for part in band for v in part]
    values = [v for v in values if math.isfinite(v)] or [0.0, 1.0]
    yticks = nice_ticks(min(values), max(values))
    y0, y1 = yticks[0], yticks[-1]
    xticks = [t for t in nice_ticks(1, n, 6) if 1 <= t <= n and float(t).is_integer()] or [1]
    x_hi = max(n, 2)

    def px(x: float) -> float:
        return left + (x - 1) / (x_hi - 1) * pw

    def py(y: float) -> float:
        return top + (1 - (y - y0) / ((y1 - y0) or 1)) * ph

    def points(ys: list[float]) -> str:
        return " ".join(f"{px(i + 1):.1f},{py(v):.1f}" for i, v in enumerate(ys))

    out = _frame(width, height, title, ylabel, left, pw, yticks, py)
    for t in xticks:
        out.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{top + ph}" y2="{top + ph + 5}" class="ca"/>'
                   f'<text x="{px(t):.1f}" y="{top + ph + 18}" text-anchor="middle" class="cl">{_fmt(t)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="cf"/>')
    for s in series:
        for i, (lower, upper) in enumerate(s.bands):
            poly = points(upper) + " " + " ".join(
                f"{px(j + 1):.1f},{py(v):.1f}" for j, v in reversed(list(enumerate(lower))))
            opacity = 0.1 if i < len(s.bands) - 1 or len(series) > 1 else 0.22
            out.append(f'<polygon points="{poly}" fill="{s.colour}" fill-opacity="{opacity}" stroke="none"/>')
    for s in series:
        last = f"{s.y[-1]:.1f}" if s.y else "–"
        out.append(f'<polyline points="{points(s.y)}" fill="none" stroke="{s.colour}" '
                   f'stroke-width="{s.width}" stroke-linejoin="round">'
                   f'<title>{escape(s.label)}: {last} after {len(s.y)} {escape(unit)}</title></polyline>')
        if s.markers:
            out.extend(f'<circle cx="{px(i + 1):.1f}" cy="{py(v):.1f}" r="3" fill="{s.colour}">'
                       f'<title>{escape(s.label)}: {v:.4g} at {i + 1}</title></circle>'
                       for i, v in enumerate(s.y) if math.isfinite(v))
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" text-anchor="middle" class="cx">'
               f'{escape(xlabel)}</text>')
    out.append(f'<text transform="translate(14 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" '
               f'class="cx">{escape(ylabel)}</text>')
    for i, s in enumerate(series):
        ly = top + 8 + i * 20
        out.append(f'<line x1="{left + pw + 16}" x2="{left + pw + 38}" y1="{ly}" y2="{ly}" '
                   f'stroke="{s.colour}" stroke-width="{max(s.width, 2.5)}"/>'
                   f'<text x="{left + pw + 44}" y="{ly + 4}" class="cl">{escape(s.label)}</text>')
    out.append("</svg>")
    return "".join(out)


def bar_chart(categories: list[str], series: list[Series], *, ylabel: str, title: str = "",
              width: int = 720, height: int = 330) -> str:
    """Grouped bars: one group per category, one bar per series (`Series.y[i]` is its value
    in category i; NaN: no bar). The y axis starts at 0 for positive values."""
    left, right, top, bottom = 58, 150, 30 if title else 14, 44
    pw, ph = width - left - right, height - top - bottom
    values = [v for s in series for v in s.y if math.isfinite(v)] or [0.0, 1.0]
    yticks = nice_ticks(min(0.0, min(values)), max(values))
    y0, y1 = yticks[0], yticks[-1]

    def py(y: float) -> float:
        return top + (1 - (y - y0) / ((y1 - y0) or 1)) * ph

    slot = pw / max(len(categories), 1)
    bar = slot * 0.8 / max(len(series), 1)
    out = _frame(width, height, title, ylabel, left, pw, yticks, py)
    for i, name in enumerate(categories):
        out.append(f'<text x="{left + (i + 0.5) * slot:.1f}" y="{top + ph + 18}" '
                   f'text-anchor="middle" class="cl">{escape(name)}</text>')
        for j, s in enumerate(series):
            v = s.y[i] if i < len(s.y) else math.nan
            if not math.isfinite(v):
                continue
            x = left + i * slot + slot * 0.1 + j * bar
            y, base = py(v), py(max(y0, 0.0))
            out.append(f'<rect x="{x:.1f}" y="{min(y, base):.1f}" width="{bar * 0.92:.1f}" '
                       f'height="{abs(base - y):.1f}" fill="{s.colour}">'
                       f'<title>{escape(s.label)}, {escape(name)}: {v:.2f}</title></rect>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="cf"/>')
    out.append(f'<text transform="translate(14 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" '
               f'class="cx">{escape(ylabel)}</text>')
    for i, s in enumerate(series):
        ly = top + 8 + i * 20
        out.append(f'<rect x="{left + pw + 16}" y="{ly - 6}" width="16" height="12" fill="{s.colour}"/>'
                   f'<text x="{left + pw + 38}" y="{ly + 4}" class="cl">{escape(s.label)}</text>')
    out.append("</svg>")
    return "".join(out)
