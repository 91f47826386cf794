"""The PeriodicTask admin: one form for any schedule, live state from Redis, beats page.

The change list reads the run state of every row on the page from Redis in one round trip
(:class:`LiveChangeList`); when Redis is down every page still renders, with a warning. The
change list's cells are in :mod:`.columns`, the change page's panels (live state, history)
in :mod:`.panels`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from redisbeat.errors import EntryNotFound, EntryPaused
from redisbeat.schedule.timing import to_ms
from redisbeat.store.run_state import EntryState

from . import sync
from .columns import LIVE_ATTR, LIVE_COLUMNS, ChangeListColumns
from .conf import get_store
from .console.views import EntryAdmin
from .delayed_admin import DelayedCallAdmin, DelayedTaskAdmin
from .describe import format_time, name_list, store_trouble
from .forms import PeriodicTaskForm
from .models import PeriodicTask, SyncStatus
from .overview import OverviewViews
from .panels import HISTORY_FIELDS, STATUS_FIELDS, TEMPLATES, UNAVAILABLE, StatusPanels
from .pausing import PauseAdmin

__all__ = ["DelayedCallAdmin", "DelayedTaskAdmin", "EntryAdmin", "PeriodicTaskAdmin"]

#: More than this many at once is more likely a "select all" by mistake than a wish.
MAX_RUN_NOW = 1000


def read_states(request: HttpRequest, rows: list[PeriodicTask]) -> None:
    """Attach each row's live state (None: unknown) with one Redis round trip."""
    states: dict[str, EntryState] = {}
    if rows:
        try:
            states = {s.name: s for s in get_store().states([r.name for r in rows])}
        except UNAVAILABLE as exc:
            messages.warning(request, f"{store_trouble(exc)}; live state is not shown.")
    for row in rows:
        setattr(row, LIVE_ATTR, states.get(row.name))


class LiveChangeList(ChangeList):
    """A change list whose rows carry their live state from Redis (one round trip a page)."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        # Evaluates the page's queryset once; the template iterates the same cached rows.
        read_states(request, list(self.result_list))


HINT = "Fill in the fields of the chosen kind; the fields of the other kinds are ignored."


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[PeriodicTask]
else:  # ModelAdmin is generic only in the stubs
    _ModelAdmin = admin.ModelAdmin


@admin.register(PeriodicTask)
class PeriodicTaskAdmin(ChangeListColumns, StatusPanels, PauseAdmin, _ModelAdmin):
    form = PeriodicTaskForm
    list_display = ("name", "task", "schedule", "enabled", *LIVE_COLUMNS, "sync_cell")
    list_filter = ("enabled", "kind", "sync_status")
    search_fields = ("name", "task", "description")
    search_help_text = "Search by name, task or description."
    list_per_page = 100
    show_full_result_count = False
    actions = (
        "enable_tasks",
        "disable_tasks",
        "run_now",
        "pause_selected",
        "resume_selected",
        "sync_tasks",
    )
    radio_fields = {"kind": admin.HORIZONTAL}  # noqa: RUF012 (Django's own idiom)
    readonly_fields = (*STATUS_FIELDS, *HISTORY_FIELDS)
    save_on_top = True

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": ("redisbeat_django/admin.css",)}
        js = ("redisbeat_django/periodictask.js",)

    def get_fieldsets(self, request: HttpRequest, obj: PeriodicTask | None = None) -> Any:
        # The check box is for those who save (a view-only page would show it empty).
        saves = (
            self.has_add_permission(request)
            if obj is None
            else self.has_change_permission(request, obj)
        )
        skip = ("unregistered_ok",) if saves else ()
        task = ("name", "task", *skip, "args", "kwargs", "enabled", "description")
        schedule = (
            "kind",
            ("every", "period"),
            ("minute", "hour", "day_of_month", "month_of_year", "day_of_week"),
            "cron_expression",
            "timezone",
            ("dst_gap", "dst_fold"),
            "clocked_at",
            ("solar_event", "latitude", "longitude"),
            ("start_at", "end_at"),
            ("one_off", "max_runs"),
            ("catch_up", "grace_seconds"),
            ("overlap", "jitter"),
        )
        routing = (
            "queue",
            "exchange",
            "routing_key",
            "priority",
            "headers",
            ("expire_seconds", "expire_at_end"),
        )
        fieldsets: list[tuple[str, dict[str, Any]]] = [
            ("Task", {"fields": task}),
            ("Schedule", {"fields": schedule, "classes": ("rb-schedule",), "description": HINT}),
            ("Routing", {"fields": routing, "classes": ("collapse",)}),
        ]
        if obj is not None:
            fieldsets.insert(0, ("Status", {"fields": STATUS_FIELDS}))
            fieldsets.insert(1, ("History", {"fields": HISTORY_FIELDS}))
        return fieldsets

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return LiveChangeList

    # -- actions ------------------------------------------------------------------------------

    @admin.action(description="Enable selected periodic tasks", permissions=["change"])
    def enable_tasks(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected periodic tasks", permissions=["change"])
    def disable_tasks(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        self._set_enabled(request, queryset, False)

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[PeriodicTask], enabled: bool
    ) -> None:
        count = queryset.update(enabled=enabled)  # pushed to Redis once this commits
        what = "Enabled" if enabled else "Disabled"
        messages.success(request, f"{what} {count} periodic task(s).")
        if PeriodicTask.objects.filter(sync_status=SyncStatus.PENDING).exists():
            messages.warning(
                request,
                "Some periodic tasks are still waiting for Redis (see the Sync column); "
                "they are pushed as soon as it answers.",
            )

    @admin.action(description="Run selected periodic tasks now", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        self._run_now(request, list(queryset.only("pk", "name", "sync_status")[: MAX_RUN_NOW + 1]))

    @admin.action(description="Sync selected periodic tasks to Redis", permissions=["change"])
    def sync_tasks(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        result = sync.push(list(queryset.values_list("pk", flat=True)))
        if result.unavailable:
            messages.error(request, f"Nothing was synced: {result.unavailable}.")
            return
        messages.success(
            request,
            f"Synced to Redis: {len(result.added)} added, {len(result.updated)} updated, "
            f"{result.unchanged} unchanged.",
        )
        self._report_rejected(request, result.rejected)

    def _report_rejected(self, request: HttpRequest, rejected: dict[str, str]) -> None:
        for why in list(rejected.values())[:10]:
            messages.error(request, f"Not accepted by Redis: {why}")
        if len(rejected) > 10:
            messages.error(request, f"{len(rejected) - 10} more were not accepted.")

    def _run_now(self, request: HttpRequest, rows: list[PeriodicTask]) -> None:
        if len(rows) > MAX_RUN_NOW:
            messages.error(request, f"Select at most {MAX_RUN_NOW} periodic tasks to run now.")
            return
        unsynced = [r.pk for r in rows if r.sync_status != "synced"]
        rejected: dict[str, str] = {}
        if unsynced:
            result = sync.push(unsynced)
            if result.unavailable:
                messages.error(request, f"Nothing was run: {result.unavailable}.")
                return
            rejected = result.rejected
            self._report_rejected(request, rejected)
        due, missing, paused = [], [], []
        try:
            store = get_store()
            for name in (r.name for r in rows if r.name not in rejected):
                try:
                    store.run_now(name)
                    due.append(name)
                except EntryNotFound:
                    missing.append(name)
                except EntryPaused:
                    paused.append(name)
            beats = store.beats() if due else []
        except UNAVAILABLE as exc:
            messages.error(request, f"{store_trouble(exc)}. Due now: {name_list(due) or 'none'}.")
            return
        if missing:
            messages.error(request, f"Not in Redis (try syncing them): {name_list(missing)}.")
        if paused:
            messages.error(request, f"Paused (resume them first): {name_list(paused)}.")
        if due:
            messages.success(request, f"Made due now (a beat sends it at once): {name_list(due)}.")
            if not beats:
                messages.warning(request, "No beat is running: they run when one starts.")

    # -- extra views --------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        info = f"{self.opts.app_label}_{self.opts.model_name}"
        wrap = self.admin_site.admin_view
        return [
            path("beats/", wrap(self.beats_view), name=f"{info}_beats"),
            *OverviewViews(self).urls(),
            path("<path:object_id>/run-now/", wrap(self.run_now_view), name=f"{info}_run_now"),
            path("<path:object_id>/pause/", wrap(self.pause_view), name=f"{info}_pause"),
            path("<path:object_id>/resume/", wrap(self.resume_view), name=f"{info}_resume"),
            path("<path:object_id>/backfill/", wrap(self.backfill_view), name=f"{info}_backfill"),
            *super().get_urls(),
        ]

    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The change form's "Run now" button (POST, change permission, CSRF by admin_view)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404(f"No periodic task with id {object_id!r}")
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        self._run_now(request, [obj])
        name = f"admin:{self.opts.app_label}_{self.opts.model_name}_change"
        return redirect(reverse(name, args=[quote(obj.pk)], current_app=self.admin_site.name))

    def beats_view(self, request: HttpRequest) -> HttpResponse:
        """Live beats and quarantined entries, from Redis."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        beats: list[dict[str, Any]] = []
        quarantined: list[Any] = []
        try:
            store = get_store()
            now_ms = store.now_ms()
            for beat in sorted(store.beats(), key=lambda b: b.id):
                ago = max(0.0, (now_ms - to_ms(beat.last_seen)) / 1000)
                beats.append({"beat": beat, "last_seen": format_time(beat.last_seen), "ago": ago})
            quarantined = sorted(store.quarantined().values(), key=lambda q: q.name)
        except UNAVAILABLE as exc:
            messages.error(request, f"{store_trouble(exc)}.")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Live beats",
            "beats": beats,
            "quarantined": [{"q": q, "at": format_time(q.at)} for q in quarantined],
        }
        return TemplateResponse(request, f"{TEMPLATES}/beats.html", context)
