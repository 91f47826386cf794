"""Bar charts as inline SVG, drawn on the server: no script, no font or library to fetch, so
the overview works offline. Colours come from the admin's CSS variables (admin.css), so the
charts follow its light and dark themes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

WIDTH, HEIGHT = 600, 120
#: Room for the labels: the largest value above the bars, the times below.
TOP, BOTTOM = 16, 16


@dataclass(frozen=True)
class Bar:
    value: float
    #: What hovering the bar says, e.g. "12:05 UTC: 120 sent".
    title: str


def scale_top(largest: float) -> float:
    """A round number at least ``largest`` (1, 2 or 5 times a power of ten), for the axis."""
    if largest <= 0:
        return 1.0
    step = 1.0
    while step * 10 < largest:
        step *= 10
    while step > largest * 10:  # below 1
        step /= 10
    return next(m * step for m in (1, 2, 5, 10) if m * step >= largest)


def bar_chart(bars: Sequence[Bar], *, label: str, unit: str, first: str, last: str) -> SafeString:
    """An SVG of ``bars`` left to right, the axis's top value labelled in ``unit``, ``first``
    and ``last`` under the ends; ``label`` names it for screen readers."""
    top = scale_top(max((b.value for b in bars), default=0.0))
    slot = WIDTH / max(1, len(bars))
    room = HEIGHT - TOP - BOTTOM
    rects = format_html_join(
        "",
        '<rect class="rb-bar" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
        (
            (
                *(f"{v:.1f}" for v in (i * slot + 1, TOP + room - h, max(1.0, slot - 2), h)),
                bar.title,
            )
            for i, bar in enumerate(bars)
            if (h := room * min(bar.value, top) / top) > 0
        ),
    )
    shown = sum(1 for b in bars if b.value > 0)
    return format_html(
        '<svg class="rb-chart" viewBox="0 0 {} {}" role="img" aria-label="{}" data-bars="{}">'
        '<line class="rb-axis" x1="0" y1="{}" x2="{}" y2="{}"></line>'
        '<line class="rb-grid" x1="0" y1="{}" x2="{}" y2="{}"></line>'
        '<text x="2" y="11">{} {}</text>{}'
        '<text x="2" y="{}">{}</text><text x="{}" y="{}" text-anchor="end">{}</text></svg>',
        WIDTH,
        HEIGHT,
        label,
        shown,
        TOP + room,
        WIDTH,
        TOP + room,
        TOP,
        WIDTH,
        TOP,
        _number(top),
        unit,
        rects,
        HEIGHT - 3,
        first,
        WIDTH - 2,
        HEIGHT - 3,
        last,
    )


def _number(value: float) -> str:
    return f"{value:g}" if value < 1000 else f"{value:,.0f}"
