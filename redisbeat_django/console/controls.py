"""The runtime controls of any entry, whatever its source: enable, disable, pause, resume,
run now, backfill and release from quarantine. Each is one call of the store's API, with
its guarantees (a compare-and-set write, a pause kept in the run state, a backfill sent once
each), and says what it did in an admin message.

An entry of the ``django`` source is enabled and disabled through its row: the row is what
a sync pushes, so a change made in Redis alone would be undone by the next one.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.forms import Form
from django.http import HttpRequest
from django.utils import timezone

from redisbeat import Entry, ScheduleStore
from redisbeat.errors import CorruptEntry, EntryNotFound, EntryPaused, InvalidEntry, RedisBeatError

from ..conf import get_store
from ..describe import format_time, store_trouble
from ..models import PeriodicTask, SyncStatus
from ..pausing import BackfillForm, PauseForm

Control = Callable[[HttpRequest, ScheduleStore, str], None]


def control(request: HttpRequest, name: str, action: str) -> None:
    """Apply ``action`` (a key of :data:`CONTROLS`) to entry ``name``; its outcome, or why
    it was not done, as a message."""
    handler = CONTROLS.get(action)
    if handler is None:
        messages.error(request, f"Unknown control {action!r}.")
        return
    try:
        handler(request, get_store(), name)
    except EntryNotFound:
        messages.error(request, f"Not done: Redis holds no entry named {name}.")
    except EntryPaused:
        messages.error(request, f"Not run: {name} is paused; resume it first.")
    except InvalidEntry as exc:
        messages.error(request, f"Not done: {exc}")
    except RedisBeatError as exc:
        messages.error(request, f"Not done: {store_trouble(exc)}.")


def _set_enabled(request: HttpRequest, store: ScheduleStore, name: str, enabled: bool) -> None:
    what = "Enabled" if enabled else "Disabled"
    if store.get(name).source == "django":
        if not request.user.has_perm("redisbeat_django.change_periodictask"):
            messages.error(
                request,
                f"Not done: {name} is a periodic task row, which this changes; that needs "
                "the permission to change periodic tasks.",
            )
            return
        rows = PeriodicTask.objects.filter(name=name)
        if rows.update(enabled=enabled):  # pushed to Redis once this commits
            if rows.filter(sync_status=SyncStatus.PENDING).exists():
                messages.warning(request, f"{what} {name}; it reaches Redis once it answers.")
            else:
                messages.success(request, f"{what} {name} (its periodic task row).")
            return
    if enabled:
        store.enable(name)
    else:
        store.disable(name)
    messages.success(request, f"{what} {name}.")


def _enable(request: HttpRequest, store: ScheduleStore, name: str) -> None:
    _set_enabled(request, store, name, True)


def _disable(request: HttpRequest, store: ScheduleStore, name: str) -> None:
    _set_enabled(request, store, name, False)


def _pause(request: HttpRequest, store: ScheduleStore, name: str) -> None:
    form = PauseForm(request.POST)
    if not _valid(request, form, "Not paused"):
        return
    until = form.cleaned_data["until"]
    if until is not None and timezone.is_naive(until):
        until = timezone.make_aware(until)
    store.pause(name, until, form.cleaned_data["note"])
    messages.success(
        request, f"Paused {name} until {format_time(until) if until else 'it is resumed'}."
    )


def _resume(request: HttpRequest, store: ScheduleStore, name: str) -> None:
    if store.resume(name):
        messages.success(request, f"Resumed {name}: it runs again from its next run.")
    else:
        messages.warning(request, f"{name} was not paused.")


def _run_now(request: HttpRequest, store: ScheduleStore, name: str) -> None:
    store.run_now(name)
    messages.success(request, f"Made {name} due now: a beat sends it at once.")
    if not store.beats():
        messages.warning(request, "No beat is running: it runs when one starts.")


def _backfill(request: HttpRequest, store: ScheduleStore, name: str) -> None:
    form = BackfillForm(request.POST)
    if not _valid(request, form, "Not backfilled"):
        return
    data = form.cleaned_data
    sent = store.backfill(name, data["start"], data["end"], rate=data["rate"])
    messages.success(
        request,
        f"Backfilling {name}: {len(sent)} run(s), sent over {len(sent) / data['rate']:.0f} s "
        f"(pending owner backfill:{name}).",
    )


def _release(request: HttpRequest, store: ScheduleStore, name: str) -> None:
    """Put a quarantined definition back on the schedule as it was stored (the command
    line's ``quarantine restore`` can fix it first)."""
    record = store.states([name])[0].quarantined
    if record is None:
        messages.warning(request, f"{name} is not quarantined.")
        return
    try:
        entry = Entry.loads(record.definition, name)
    except CorruptEntry as exc:
        messages.error(
            request,
            f"Not released: the definition still does not load ({exc.message}); fix it "
            f"where it is defined, or with `celery redisbeat quarantine restore {name} --edit`.",
        )
        return
    store.upsert(entry, force=True)
    next_run = store.states([name])[0].next_run_at
    messages.success(request, f"Released {name} from quarantine; next run {format_time(next_run)}.")


def _valid(request: HttpRequest, form: Form, what: str) -> bool:
    if form.is_valid():
        return True
    problems = "; ".join(
        ("" if field == "__all__" else f"{field}: ") + " ".join(str(e) for e in errors)
        for field, errors in form.errors.items()
    )
    messages.error(request, f"{what}: {problems}")
    return False


CONTROLS: dict[str, Control] = {
    "enable": _enable,
    "disable": _disable,
    "pause": _pause,
    "resume": _resume,
    "run_now": _run_now,
    "backfill": _backfill,
    "release": _release,
}
