"""Pausing, resuming and backfilling periodic tasks from the admin: a form on the change
page (until when, and why), a Resume button, list actions, and a Backfill form (a past
range, sent once each).

A pause is runtime state kept in Redis (:meth:`redisbeat.ScheduleStore.pause`), like
"Run now": it is not a column, so saving the task, or a sync, leaves it paused. A backfill
(:meth:`redisbeat.ScheduleStore.backfill`) queues the range's occurrences as delayed tasks.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from redisbeat.errors import EntryNotFound, InvalidEntry, RedisBeatError

from .conf import get_store
from .describe import name_list, store_trouble
from .models import PeriodicTask

TEMPLATE = "admin/redisbeat_django/periodictask/pause.html"
BACKFILL_TEMPLATE = "admin/redisbeat_django/periodictask/backfill.html"


class PauseForm(forms.Form):
    until = forms.DateTimeField(
        required=False,
        label="Paused until",
        help_text="Empty: until it is resumed. In the site's time zone, e.g. 2030-01-31 18:00.",
    )
    note = forms.CharField(
        required=False, max_length=500, label="Why", widget=forms.TextInput(attrs={"size": 60})
    )


class BackfillForm(forms.Form):
    start = forms.DateTimeField(label="From", help_text="The first due time to send.")
    end = forms.DateTimeField(label="To", help_text="The last due time to send: in the past.")
    rate = forms.FloatField(
        initial=10.0,
        min_value=0.001,
        max_value=1000,
        label="Per second",
        help_text="How many a second go out, so that on-time runs are not held up.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for field in ("start", "end"):
            if data.get(field) is not None and timezone.is_naive(data[field]):
                data[field] = timezone.make_aware(data[field])
        return data


class PauseAdmin:
    """The pause and resume views and actions, for the PeriodicTask admin to inherit."""

    admin_site: Any
    opts: Any

    def pause_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """GET: the pause form; POST: pause the task until the time given (or resumed)."""
        obj = self._changeable(request, object_id)
        form = PauseForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            until = form.cleaned_data["until"]
            if until is not None and timezone.is_naive(until):
                until = timezone.make_aware(until)
            if _apply(
                request, [obj.name], lambda s, n: s.pause(n, until, form.cleaned_data["note"])
            ):
                messages.success(request, f"Paused {obj.name}{_until_text(until)}.")
                return self._back_to(obj)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": obj,
            "title": f"Pause {obj.name}",
            "form": form,
        }
        return TemplateResponse(request, TEMPLATE, context)

    def backfill_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """GET: the backfill form; POST: send each occurrence of the range once."""
        obj = self._changeable(request, object_id)
        form = BackfillForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            data, sent = form.cleaned_data, []

            def backfill(store: Any, name: str) -> None:
                sent.extend(store.backfill(name, data["start"], data["end"], rate=data["rate"]))

            if _apply(request, [obj.name], backfill):
                took = len(sent) / data["rate"]
                messages.success(
                    request,
                    f"Backfilling {obj.name}: {len(sent)} run(s), sent over {took:.0f} s "
                    f"(pending owner backfill:{obj.name}).",
                )
                return self._back_to(obj)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": obj,
            "title": f"Backfill {obj.name}",
            "form": form,
        }
        return TemplateResponse(request, BACKFILL_TEMPLATE, context)

    def resume_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: resume the task from its next occurrence."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        obj = self._changeable(request, object_id)
        _apply(request, [obj.name], lambda s, n: s.resume(n), "Resumed")
        return self._back_to(obj)

    @admin.action(
        description="Pause selected periodic tasks (until resumed)", permissions=["change"]
    )
    def pause_selected(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        names = list(queryset.values_list("name", flat=True))
        _apply(request, names, lambda s, n: s.pause(n, None, "paused from the list"), "Paused")

    @admin.action(description="Resume selected periodic tasks", permissions=["change"])
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        names = list(queryset.values_list("name", flat=True))
        _apply(request, names, lambda s, n: s.resume(n), "Resumed")

    def _changeable(self, request: HttpRequest, object_id: str) -> PeriodicTask:
        obj: PeriodicTask | None = self.get_object(request, unquote(object_id))  # type: ignore[attr-defined]
        if obj is None:
            raise Http404(f"No periodic task with id {object_id!r}")
        if not self.has_change_permission(request, obj):  # type: ignore[attr-defined]
            raise PermissionDenied
        return obj

    def _back_to(self, obj: PeriodicTask) -> HttpResponse:
        name = f"admin:{self.opts.app_label}_{self.opts.model_name}_change"
        return redirect(reverse(name, args=[quote(obj.pk)], current_app=self.admin_site.name))


def _apply(request: HttpRequest, names: list[str], call: Any, done: str = "") -> bool:
    """``call(store, name)`` for each name; what happened, as admin messages."""
    ok, missing = [], []
    try:
        store = get_store()
        for name in names:
            try:
                call(store, name)
                ok.append(name)
            except EntryNotFound:
                missing.append(name)
    except InvalidEntry as exc:
        messages.error(request, str(exc))
        return False
    except RedisBeatError as exc:
        messages.error(request, f"{store_trouble(exc)}. Done: {name_list(ok) or 'none'}.")
        return False
    if missing:
        messages.error(request, f"Not in Redis (try syncing them): {name_list(missing)}.")
    if ok and done:
        messages.success(request, f"{done}: {name_list(ok)}.")
    return bool(ok)


def _until_text(until: Any) -> str:
    return (
        " until resumed"
        if until is None
        else f" until {timezone.localtime(until):%Y-%m-%d %H:%M %Z}"
    )
