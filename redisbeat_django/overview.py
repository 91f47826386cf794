"""The admin's deployment overview: what ``celery -A proj redisbeat status`` shows, and the
last hour charted, refreshed by the page itself.

Three views under the periodic tasks' admin: the page, the part of it that refreshes (HTML,
fetched every :data:`REFRESH_S` seconds by ``overview.js``), and the same numbers as JSON
for scripts. Each reads :mod:`.glance` once: a handful of Redis round trips, whatever the
number of entries and delayed tasks.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone as django_tz

from .charts import Bar, bar_chart
from .conf import get_store
from .describe import NO_VALUE, store_trouble, time_cell
from .glance import Glance, Minute, as_json, read
from .panels import UNAVAILABLE

#: Seconds between two refreshes of the page's numbers and charts.
REFRESH_S = 5
TEMPLATES = "admin/redisbeat_django/overview"
#: The counts, in the order ``status`` shows them: (field, heading, what it means).
COUNTS = (
    ("entries", "Entries", "Stored, enabled or not"),
    ("scheduled", "Scheduled", "With a next run: enabled, not finished"),
    ("due", "Due now", "Due and not yet claimed by a beat"),
    ("overdue", "Overdue", "Due for longer than {overdue} s"),
    ("inflight", "In flight", "Claimed by a beat, not yet finished"),
    ("quarantined", "Quarantined", "Set aside: the definition does not load, or kept failing"),
    ("delayed", "Delayed tasks pending", "One-off delayed tasks waiting (or being sent)"),
)


class OverviewViews:
    """The overview's views, for a ModelAdmin of PeriodicTask (its view permission)."""

    def __init__(self, model_admin: ModelAdmin[Any]) -> None:
        self.model_admin = model_admin

    def urls(self) -> list[URLPattern]:
        opts = self.model_admin.opts
        info = f"{opts.app_label}_{opts.model_name}"
        wrap = self.model_admin.admin_site.admin_view
        return [
            path("overview/", wrap(self.page), name=f"{info}_overview"),
            path("overview/live/", wrap(self.live), name=f"{info}_overview_live"),
            path("overview/json/", wrap(self.data), name=f"{info}_overview_json"),
        ]

    def _check(self, request: HttpRequest) -> None:
        if not self.model_admin.has_view_permission(request):
            raise PermissionDenied

    def page(self, request: HttpRequest) -> HttpResponse:
        self._check(request)
        opts = self.model_admin.opts
        name = f"admin:{opts.app_label}_{opts.model_name}_overview_live"
        context = {
            **self.model_admin.admin_site.each_context(request),
            "opts": opts,
            "title": "Deployment overview",
            "live_url": reverse(name, current_app=self.model_admin.admin_site.name),
            "refresh_s": REFRESH_S,
            **live_context(),
        }
        return TemplateResponse(request, f"{TEMPLATES}/page.html", context)

    def live(self, request: HttpRequest) -> HttpResponse:
        self._check(request)
        return TemplateResponse(request, f"{TEMPLATES}/live.html", live_context())

    def data(self, request: HttpRequest) -> HttpResponse:
        self._check(request)
        try:
            glance = read(get_store())
        except UNAVAILABLE as exc:
            return JsonResponse({"error": store_trouble(exc)}, status=503)
        return JsonResponse(as_json(glance))


def live_context() -> dict[str, Any]:
    """What the refreshing part shows (an ``error`` instead when Redis does not answer)."""
    try:
        glance = read(get_store())
    except UNAVAILABLE as exc:
        return {"error": store_trouble(exc), "updated": time_cell(django_tz.now())}
    return {
        "updated": time_cell(glance.now),
        "counts": [
            {
                "field": field,
                "heading": heading,
                "help": why.format(overdue=f"{glance.overdue_after:g}"),
                "value": getattr(glance.counts, field),
            }
            for field, heading, why in COUNTS
        ],
        "beats": beat_rows(glance),
        "charts": charts(glance.minutes),
    }


def beat_rows(glance: Glance) -> list[dict[str, Any]]:
    """Each beat alive, with what its last summary says (dashes: none recorded yet)."""
    rows = []
    for beat in glance.beats:
        stats = glance.stats.get(beat.id)
        row: dict[str, Any] = {"beat": beat, "seen": time_cell(beat.last_seen), "stats": stats}
        if stats:
            row["late"] = " / ".join(
                f"{float(stats.get(k, 0)):g}" for k in ("late_p50_ms", "late_p99_ms", "late_max_ms")
            )
        else:
            row["late"] = NO_VALUE
        rows.append(row)
    return rows


def charts(minutes: list[Minute]) -> list[dict[str, Any]]:
    """Sends, late p99 and missed occurrences per minute, as SVG bar charts."""
    if not minutes:
        return []
    zone = django_tz.get_current_timezone()

    def at(minute: Minute) -> str:
        return minute.start.astimezone(zone).strftime("%H:%M")

    first, last = f"{at(minutes[0])}", f"{at(minutes[-1])} (now)"
    found = []
    for key, heading, unit in (
        ("sent", "Sent per minute", "sent"),
        ("late_p99_ms", "Late p99 per minute (worst beat)", "ms"),
        ("missed", "Missed per minute", "missed"),
    ):
        values = [float(getattr(m, key)) for m in minutes]
        bars = [Bar(v, f"{at(m)}: {v:,.0f} {unit}") for v, m in zip(values, minutes, strict=True)]
        svg = bar_chart(bars, label=heading, unit=unit, first=first, last=last)
        found.append({"key": key, "heading": heading, "svg": svg, "total": sum(values)})
    return found
