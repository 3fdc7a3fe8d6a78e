"""Counts per minute drawn as a row of bars in inline SVG: rendered on the server with the
page, so no chart library and no build step."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

MIN_BAR_PX = 2  # a minute with any dead letter stays visible beside a much taller peak
ROW_PX = 180  # the page's per-minute column
MAX_BAR_PX = 6  # wider, a short timeline reads as a few blocks rather than a row of minutes
_BAR = Markup('<rect x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>')
_SVG = Markup(
    '<svg class="spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{label}">'
    '<line x1="0" y1="{base}" x2="{w}" y2="{base}"></line>{bars}</svg>'
)


def sparkline(counts: Sequence[int], peak: int | None = None, bar: int = 3, height: int = 16) -> Markup:
    """One bar per minute, oldest left, ``bar`` px apart; heights relative to ``peak`` (the
    row's own by default: pass one peak to rows that should compare). Only minutes with a
    count get a bar, with its count and age as a tooltip."""
    top = max(peak or 0, max(counts, default=0), 1)
    bars = Markup("").join(
        _BAR.format(i * bar, height - h, max(bar - 1, 1), h, f"{n}, {_ago(len(counts) - 1 - i)}")
        for i, n in enumerate(counts)
        if n and (h := max(MIN_BAR_PX, round(height * n / top)))
    )
    label = f"dead letters per minute, last {len(counts)} minutes, at most {max(counts, default=0)}"
    return _SVG.format(w=len(counts) * bar, h=height, base=height - 0.5, label=label, bars=bars)


def _ago(minutes: int) -> str:
    return "this minute" if minutes == 0 else f"{minutes} min ago"


def bar_px(bars: int, width: int = ROW_PX) -> int:
    """The bar spacing that fits ``bars`` bars in ``width`` px: at least 1 px, at most ``MAX_BAR_PX``."""
    return max(1, min(MAX_BAR_PX, width // max(bars, 1)))
