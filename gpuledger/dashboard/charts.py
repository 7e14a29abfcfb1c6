"""Inline SVG charts drawn in Python: no JavaScript, no chart library, works from ``file://``.

Each function returns one ``<svg>`` element as text. Values are plain floats; labels are escaped.
An empty series still draws its axes and a "no data" note, so a chart container is never empty.
"""

from __future__ import annotations

import math
from html import escape

PALETTE = ("#3b6ea8", "#e0883a", "#4c9a5b", "#c4453c", "#8a63b8", "#8c6d4f", "#d36fb0", "#7a7a7a", "#b5b83a", "#3ab5c4")
WIDTH, HEIGHT, PAD_L, PAD_B, PAD_T = 640, 260, 64, 46, 18


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))


def si(value: float) -> str:
    """``value`` in at most three significant digits with an SI prefix: 250µ, 1.5k, 2M, 0.5."""
    if value == 0:
        return "0"
    size = abs(value)
    if 0.1 <= size < 1000:
        return f"{value:.3g}"
    factor, prefix = next(((f, p) for f, p in PREFIXES if size >= f * 0.9995), PREFIXES[-1])
    return f"{value / factor:.3g}{prefix}"


def parse_si(text: str) -> float:
    """The number an ``si`` label stands for."""
    factors = {p: f for f, p in PREFIXES if p}
    return float(text[:-1]) * factors[text[-1]] if text and text[-1] in factors else float(text)


def _fmt(value: float) -> str:
    """A value in a bar's tooltip: grouped digits for ordinary sizes, SI prefixes for tiny or huge ones."""
    if value == 0 or 0.01 <= abs(value) < 1e7:
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"
    return si(value)


def nice_step(top: float, n: int = 4) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about ``n`` steps up to ``top``."""
    raw = top / n
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * 0.999)


def _ticks(top: float, n: int = 4) -> list[float]:
    """Ticks from 0 by a round step, the last at or above ``top``."""
    step = nice_step(top, n)
    count = math.ceil(top / step - 1e-9)
    return [round(step * i, 15) for i in range(count + 1)]


def _frame(title: str, body: list[str], legend: list[str], ticks: list[float], unit: str) -> str:
    plot_h = HEIGHT - PAD_B - PAD_T
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT + 22 * _rows(legend)}" '
        f'width="{WIDTH}" role="img" aria-label="{escape(title)}">'
    ]
    top = ticks[-1]
    for tick in ticks:
        y = PAD_T + plot_h - (tick / top * plot_h if top else 0)
        parts.append(f'<line x1="{PAD_L}" x2="{WIDTH - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{si(tick)}</text>')
    parts.append(
        f'<text x="12" y="{PAD_T + plot_h / 2:.0f}" font-size="11" transform="rotate(-90 12 '
        f'{PAD_T + plot_h / 2:.0f})" text-anchor="middle">{escape(unit)}</text>'
    )
    parts.extend(body)
    for i, name in enumerate(legend):
        x, y = PAD_L + (i % 4) * 145, HEIGHT + 4 + (i // 4) * 22
        parts.append(
            f'<rect x="{x}" y="{y}" width="12" height="12" fill="{color(i)}"/>'
            f'<text x="{x + 16}" y="{y + 11}" font-size="11">{escape(name[:20])}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _rows(legend: list[str]) -> int:
    return (len(legend) + 3) // 4


def _empty(title: str, unit: str) -> str:
    note = f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" font-size="13" fill="#888">no data</text>'
    return _frame(title, [note], [], _ticks(1.0), unit)


def stacked_bars(title: str, categories: list[str], series: dict[str, list[float]], unit: str) -> str:
    """One bar per category, stacked by series (e.g. cost per day stacked by business unit)."""
    totals = [sum(values[i] for values in series.values()) for i in range(len(categories))]
    if not categories or max(totals, default=0.0) <= 0:
        return _empty(title, unit)
    ticks = _ticks(max(totals) * 1.02)
    top = ticks[-1]
    plot_h, plot_w = HEIGHT - PAD_B - PAD_T, WIDTH - PAD_L - 8
    step = plot_w / len(categories)
    bar = max(step * 0.7, 1.0)
    body: list[str] = []
    for i, cat in enumerate(categories):
        x, base = PAD_L + i * step + (step - bar) / 2, float(PAD_T + plot_h)
        for s, (name, values) in enumerate(series.items()):
            h = max(values[i], 0.0) / top * plot_h
            if h > 0:
                body.append(
                    f'<rect class="mark" x="{x:.1f}" y="{base - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                    f'fill="{color(s)}"><title>{escape(cat)} · {escape(name)}: {_fmt(values[i])}'
                    "</title></rect>"
                )
            base -= h
        if len(categories) <= 12 or i % max(len(categories) // 12, 1) == 0:
            body.append(
                f'<text x="{x + bar / 2:.1f}" y="{HEIGHT - PAD_B + 14}" text-anchor="middle" '
                f'font-size="10">{escape(cat)}</text>'
            )
    return _frame(title, body, list(series), ticks, unit)


def grouped_bars(
    title: str, categories: list[str], series: dict[str, list[float]], unit: str, flagged: list[bool] | None = None
) -> str:
    """Bars side by side per category; ``flagged`` categories are outlined in red and marked ``!``."""
    peak = max((v for values in series.values() for v in values), default=0.0)
    if not categories or peak <= 0:
        return _empty(title, unit)
    ticks = _ticks(peak * 1.02)
    top = ticks[-1]
    plot_h, plot_w = HEIGHT - PAD_B - PAD_T, WIDTH - PAD_L - 8
    step = plot_w / len(categories)
    bar = max(step * 0.8 / max(len(series), 1), 1.0)
    body: list[str] = []
    for i, cat in enumerate(categories):
        x0 = PAD_L + i * step + step * 0.1
        for s, (name, values) in enumerate(series.items()):
            h = max(values[i], 0.0) / top * plot_h
            bad = bool(flagged and flagged[i])
            stroke = ' stroke="#d00" stroke-width="2"' if bad else ""
            body.append(
                f'<rect class="mark" x="{x0 + s * bar:.1f}" y="{PAD_T + plot_h - h:.1f}" width="{bar:.1f}" '
                f'height="{max(h, 0.5):.1f}" fill="{color(s)}"{stroke}><title>{escape(cat)} · {escape(name)}: '
                f"{_fmt(values[i])}{' (degraded)' if bad else ''}</title></rect>"
            )
        label = escape(cat[:14]) + (" !" if flagged and flagged[i] else "")
        fill = ' fill="#d00"' if flagged and flagged[i] else ""
        if len(categories) <= 14 or i % max(len(categories) // 14, 1) == 0:
            body.append(
                f'<text x="{x0 + step * 0.4:.1f}" y="{HEIGHT - PAD_B + 14}" text-anchor="middle" '
                f'font-size="10"{fill}>{label}</text>'
            )
    return _frame(title, body, list(series), ticks, unit)
