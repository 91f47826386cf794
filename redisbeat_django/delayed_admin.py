"""The admin's "Delayed tasks" pages, read from Redis, and the outbox of calls waiting for it.

Delayed tasks live only in Redis, so their list is a page of the store's due-ordered index
(``upcoming``, or ``pending`` for an owner), with a cursor to the next page: a million
pending tasks page as fast as ten. A task is found by its exact key. Cancel and reschedule
go to Redis at once and say when they came too late (a beat was already sending the task).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode

from redisbeat.errors import InvalidEntry, RedisBeatError
from redisbeat.schedule.clock import from_ms, to_ms
from redisbeat.schedule.delayed import DelayedTask as Task

from . import outbox
from .conf import get_store
from .describe import format_time, store_trouble, time_cell
from .models import DelayedCall, DelayedTask

PER_PAGE = 100
_TEMPLATES = "admin/redisbeat_django/delayedtask"

if TYPE_CHECKING:
    _TaskAdmin = admin.ModelAdmin[DelayedTask]
    _CallAdmin = admin.ModelAdmin[DelayedCall]
else:  # ModelAdmin is generic only in the stubs
    _TaskAdmin = _CallAdmin = admin.ModelAdmin


class RescheduleForm(forms.Form):
    eta = forms.DateTimeField(
        label="New due time",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": 1}),
        help_text="In the admin's time zone.",
    )
    by = forms.DurationField(
        label="Or move by",
        required=False,
        help_text='From its due time, e.g. "-2:00:00" (two hours sooner) or "1 00:00:00".',
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if (data.get("eta") is None) == (data.get("by") is None):
            raise forms.ValidationError("Give a new due time or a move, not both.")
        return data


def cursor(task: Task) -> str:
    """A page's position in the due-ordered index: the last task's due ms and key."""
    return f"{to_ms(task.eta)}:{task.key}"


def after_cursor(value: str) -> Task | None:
    due, _, key = value.partition(":")
    if not due.isdigit() or not key:
        return None
    return Task(key, "", from_ms(int(due)), None)


@admin.register(DelayedTask)
class DelayedTaskAdmin(_TaskAdmin):
    """The list, a task's page with its reschedule form, and cancel, all on Redis."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        info = f"{self.opts.app_label}_{self.opts.model_name}"
        wrap = self.admin_site.admin_view
        return [
            path("", wrap(self.changelist_view), name=f"{info}_changelist"),
            path("<path:object_id>/", wrap(self.task_view), name=f"{info}_change"),
        ]

    def _url(self, name: str, *args: str, query: dict[str, str] | None = None) -> str:
        url = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_{name}",
            args=args,
            current_app=self.admin_site.name,
        )
        return f"{url}?{urlencode(query)}" if query else url

    def _context(self, request: HttpRequest, title: str, **more: Any) -> dict[str, Any]:
        waiting = DelayedCall.objects.count()
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "waiting": waiting,
            "outbox_url": reverse(
                "admin:redisbeat_django_delayedcall_changelist", current_app=self.admin_site.name
            ),
            "can_change": self.has_change_permission(request),
            **more,
        }

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            return self._cancel_selected(request)
        key, owner = request.GET.get("key", "").strip(), request.GET.get("owner", "").strip()
        rows, total, more = self._page(request, key, owner)
        query = {k: v for k, v in (("key", key), ("owner", owner)) if v}
        context = self._context(
            request,
            "Delayed tasks",
            rows=[self._row(t) for t in rows],
            key=key,
            owner=owner,
            total=total,
            next_url=self._url("changelist", query={**query, "after": cursor(rows[-1])})
            if more
            else "",
            first_url=self._url("changelist", query=query) if "after" in request.GET else "",
        )
        return TemplateResponse(request, f"{_TEMPLATES}/change_list.html", context)

    def _page(self, request: HttpRequest, key: str, owner: str) -> tuple[list[Task], int, bool]:
        """One page, the count it is taken from, and whether there is a next page."""
        after = after_cursor(request.GET.get("after", ""))
        try:
            store = get_store()
            if key:
                task = store.get_delayed(key)
                found = [task] if task is not None and (not owner or task.owner == owner) else []
                return found, len(found), False
            if owner:
                rows = store.pending(owner, PER_PAGE + 1, after)
            else:
                rows = store.upcoming(PER_PAGE + 1, after)
            return rows[:PER_PAGE], store.count_pending(owner or None), len(rows) > PER_PAGE
        except RedisBeatError as exc:
            messages.error(request, f"{store_trouble(exc)}.")
            return [], 0, False

    def _row(self, task: Task) -> dict[str, Any]:
        return {
            "task": task,
            "url": self._url("change", quote(task.key)),
            "owner_url": self._url("changelist", query={"owner": task.owner}) if task.owner else "",
            "due": time_cell(task.eta),
        }

    def _cancel_selected(self, request: HttpRequest) -> HttpResponse:
        if not self.has_change_permission(request):
            raise PermissionDenied
        keys = request.POST.getlist("_selected_key")
        try:
            store = get_store()
            cancelled = [k for k in keys if store.cancel(k)]
        except RedisBeatError as exc:
            messages.error(request, f"Nothing was cancelled: {store_trouble(exc)}.")
            return HttpResponseRedirect(request.get_full_path())
        if cancelled:
            messages.success(request, f"Cancelled {len(cancelled)} delayed task(s).")
        late = len(keys) - len(cancelled)
        if late:
            messages.warning(
                request, f"{late} came too late: already being sent, sent, or cancelled."
            )
        return HttpResponseRedirect(request.get_full_path())

    def task_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        key = unquote(object_id)
        form = RescheduleForm(request.POST or None)
        if request.method == "POST":
            if not self.has_change_permission(request):
                raise PermissionDenied
            if "_cancel" in request.POST:
                return self._cancel_one(request, key)
            if form.is_valid():
                return self._reschedule(request, key, form.cleaned_data)
        try:
            task = get_store().get_delayed(key)
        except RedisBeatError as exc:
            messages.error(request, f"{store_trouble(exc)}.")
            task = None
        context = self._context(
            request,
            f"Delayed task {key}",
            key=key,
            task=task,
            form=form,
            eta=format_time(task.eta) if task else "",
            sent_at=format_time(task.sent_at) if task and task.sent_at else "",
            list_url=self._url("changelist"),
        )
        return TemplateResponse(request, f"{_TEMPLATES}/detail.html", context)

    def _cancel_one(self, request: HttpRequest, key: str) -> HttpResponse:
        try:
            if get_store().cancel(key):
                messages.success(request, f"Cancelled {key}: it will not be sent.")
            else:
                messages.warning(request, f"Too late to cancel {key}: it is being sent, or was.")
        except RedisBeatError as exc:
            messages.error(request, f"Not cancelled: {store_trouble(exc)}.")
        return HttpResponseRedirect(request.get_full_path())

    def _reschedule(self, request: HttpRequest, key: str, data: dict[str, Any]) -> HttpResponse:
        try:
            moved = get_store().reschedule(key, eta=data["eta"], by=data["by"])
        except InvalidEntry as exc:
            messages.error(request, f"Not rescheduled: {exc.message}.")
        except RedisBeatError as exc:
            messages.error(request, f"Not rescheduled: {store_trouble(exc)}.")
        else:
            if moved is None:
                messages.warning(
                    request, f"Too late to reschedule {key}: it is being sent, or was."
                )
            else:
                messages.success(request, f"Rescheduled {key} to {format_time(moved)}.")
        return HttpResponseRedirect(request.get_full_path())


@admin.register(DelayedCall)
class DelayedCallAdmin(_CallAdmin):
    """Calls made while Redis was unreachable, in the order they will be pushed."""

    list_display = ("id", "op", "key", "made_at", "attempts", "error")
    list_filter = ("op",)
    search_fields = ("key",)
    readonly_fields = ("op", "key", "arguments", "made_at", "attempts", "error")
    actions = ("push_now",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_push_permission(self, request: HttpRequest) -> bool:
        """Pushing is changing delayed tasks: it needs that permission."""
        return request.user.has_perm(f"{self.opts.app_label}.change_delayedtask")

    @admin.action(description="Push every waiting call to Redis now", permissions=["push"])
    def push_now(self, request: HttpRequest, queryset: QuerySet[DelayedCall]) -> None:
        try:
            pushed = outbox.push()
        except RedisBeatError as exc:
            messages.error(request, f"{store_trouble(exc)}. The calls keep waiting.")
            return
        messages.success(request, f"Pushed {pushed.pushed} call(s) to Redis.")
        if pushed.too_late:
            messages.warning(
                request,
                f"{pushed.too_late} cancel(s) or reschedule(s) came too late: the "
                "task was being sent, or had been.",
            )
        if pushed.refused:
            messages.error(request, f"{pushed.refused} call(s) were refused; see their error.")
