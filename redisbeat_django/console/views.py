"""The admin's "Entries" pages: every entry of the deployment, whatever its source, in
next-run order a page at a time (:mod:`.listing`), an entry's page (:mod:`.page`), and its
runtime controls (:mod:`.controls`).

Viewing needs the ``view_entry`` permission, a control ``control_entry`` (a superuser has
both); a control is a POST, checked for CSRF by the admin. With Redis down each page still
renders, with the error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode

from redisbeat.errors import RedisBeatError
from redisbeat.schedule.words import describe

from ..columns import LIVE_ATTR, ChangeListColumns
from ..conf import get_store
from ..describe import NO_VALUE, store_trouble
from ..models import Entry, PeriodicTask
from ..pausing import BackfillForm, PauseForm
from . import listing
from .controls import control
from .listing import PER_PAGE, SOURCES, STATES, Page, Query, Row, read_page
from .page import entry_page

TEMPLATES = "admin/redisbeat_django/entry"
#: How many earlier pages "Previous page" can go back through.
BACK_PAGES = 20
#: The change list's cells, for the live state of rows that are not periodic tasks.
CELLS = ChangeListColumns()

if TYPE_CHECKING:
    _EntryAdmin = admin.ModelAdmin[Entry]
else:  # ModelAdmin is generic only in the stubs
    _EntryAdmin = admin.ModelAdmin


@admin.register(Entry)
class EntryAdmin(_EntryAdmin):
    """Every entry in Redis; nothing to add, change or delete here: controls instead."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_control_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.control_entry")

    def get_urls(self) -> list[URLPattern]:
        info = f"{self.opts.app_label}_{self.opts.model_name}"
        wrap = self.admin_site.admin_view
        return [
            path("", wrap(self.changelist_view), name=f"{info}_changelist"),
            path("<path:object_id>/control/", wrap(self.control_view), name=f"{info}_control"),
            path("<path:object_id>/", wrap(self.entry_view), name=f"{info}_change"),
        ]

    def _url(self, name: str, *args: str, query: dict[str, Any] | None = None) -> str:
        url = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_{name}",
            args=args,
            current_app=self.admin_site.name,
        )
        return f"{url}?{urlencode(query, doseq=True)}" if query else url

    def _context(self, request: HttpRequest, title: str, **more: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "list_url": self._url("changelist"),
            "can_control": self.has_control_permission(request),
            **more,
        }

    # -- the list -----------------------------------------------------------------------------

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        state = request.GET.get("state", "")
        query = Query(
            source=request.GET.get("source", "").strip() or None,
            state=state if state in STATES else None,
            search=request.GET.get("q", "").strip(),
        )
        after, back = request.GET.get("after") or None, request.GET.getlist("back")
        page, counts = self._page(request, query, after)
        here = _query_of(query)
        context = self._context(
            request,
            "Entries",
            rows=self._rows(page.rows),
            query=query,
            page=page,
            counts=counts,
            per_page=PER_PAGE,
            scan_limit=f"{listing.SCAN_LIMIT:,}",
            filters=self._filters(query),
            **self._paging(here, page, after, back),
            wider_url=self._url("changelist", query={**here, "q": f"*{query.search}*"})
            if query.exact_name and not page.rows
            else "",
        )
        return TemplateResponse(request, f"{TEMPLATES}/change_list.html", context)

    def _paging(
        self, here: dict[str, str], page: Page, after: str | None, back: list[str]
    ) -> dict[str, str]:
        """The URLs of the next, previous and first pages ("" where there is none): a
        next page's URL carries the cursors the pages before it began at."""
        trail = [*back, after or ""][-BACK_PAGES:]
        return {
            "next_url": self._url("changelist", query={**here, "after": page.next, "back": trail})
            if page.next
            else "",
            "previous_url": self._url(
                "changelist", query={**here, "after": back[-1], "back": back[:-1]}
            )
            if back
            else "",
            "first_url": self._url("changelist", query=here) if after else "",
        }

    def _page(self, request: HttpRequest, query: Query, after: str | None) -> tuple[Page, Any]:
        try:
            store = get_store()
            try:
                page = read_page(store, query, after)
            except ValueError:  # a cursor this listing did not write
                messages.error(request, "That page's position is not one this list wrote.")
                page = read_page(store, query)
            return page, store.counts()
        except RedisBeatError as exc:
            messages.error(request, f"{store_trouble(exc)}.")
            return Page([], None), None

    def _rows(self, rows: list[Row]) -> list[dict[str, Any]]:
        """The cells of each row, the live ones those of the periodic tasks' list."""
        django = [r.name for r in rows if r.source == "django"]
        pks = dict(PeriodicTask.objects.filter(name__in=django).values_list("name", "pk"))
        zone = get_store().timezone if rows else "UTC"
        cells = []
        for row in rows:
            live = PeriodicTask(name=row.name)  # an unsaved row carries the state to the cells
            setattr(live, LIVE_ATTR, row.state)
            pk = pks.get(row.name)
            cells.append(
                {
                    "row": row,
                    "url": self._url("change", quote(row.name)),
                    "source": SOURCES.get(row.source, row.source or NO_VALUE),
                    "schedule": describe(row.entry.schedule, zone) if row.entry else row.problem,
                    "next_run": CELLS.next_run(live),
                    "last_run": CELLS.last_run(live),
                    "last_outcome": CELLS.last_outcome(live),
                    "states": ", ".join(row.states),
                    "row_url": reverse(
                        "admin:redisbeat_django_periodictask_change",
                        args=[quote(pk)],
                        current_app=self.admin_site.name,
                    )
                    if pk is not None
                    else "",
                }
            )
        return cells

    def _filters(self, query: Query) -> list[tuple[str, list[tuple[str, str, bool]]]]:
        """Each filter's choices: label, URL, selected."""
        here = _query_of(query)
        sources = dict(SOURCES)
        if query.source and query.source not in sources:
            sources[query.source] = query.source
        by_source = [
            ("All", self._url("changelist", query={**here, "source": ""}), not query.source)
        ]
        by_source += [
            (label, self._url("changelist", query={**here, "source": key}), key == query.source)
            for key, label in sources.items()
        ]
        by_state = [("All", self._url("changelist", query={**here, "state": ""}), not query.state)]
        by_state += [
            (key, self._url("changelist", query={**here, "state": key}), key == query.state)
            for key in STATES
        ]
        return [("source", by_source), ("state", by_state)]

    # -- an entry -----------------------------------------------------------------------------

    def entry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        name = unquote(object_id)
        try:
            found = entry_page(get_store(), name)
        except RedisBeatError as exc:
            messages.error(request, f"{store_trouble(exc)}.")
            found = {"name": name, "unavailable": True}
        if found is None:
            raise Http404(f"Redis holds no entry named {name!r}")
        pk = PeriodicTask.objects.filter(name=name).values_list("pk", flat=True).first()
        context = self._context(
            request,
            f"Entry {name}",
            **found,
            control_url=self._url("control", quote(name)),
            row_url=reverse(
                "admin:redisbeat_django_periodictask_change",
                args=[quote(pk)],
                current_app=self.admin_site.name,
            )
            if pk is not None and found.get("source") == "django"
            else "",
            pause_form=PauseForm(),
            backfill_form=BackfillForm(),
        )
        return TemplateResponse(request, f"{TEMPLATES}/entry.html", context)

    def control_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST ``action`` (and a pause's or a backfill's fields): one control, then back to
        the entry's page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_control_permission(request):
            raise PermissionDenied
        name = unquote(object_id)
        control(request, name, request.POST.get("action", ""))
        return HttpResponseRedirect(self._url("change", quote(name)))


def _query_of(query: Query) -> dict[str, str]:
    """The list's URL parameters for ``query`` (the empty ones left out)."""
    found = {"source": query.source or "", "state": query.state or "", "q": query.search}
    return {key: value for key, value in found.items() if value}
