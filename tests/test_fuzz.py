"""Fuzzing the stored-definition decoder, alone and inside a running dispatcher.

Whatever sits in ``{prefix}:entries`` (random text, random bytes, random JSON, a valid
definition with fields dropped, replaced or retyped, hostile payloads) ``Entry.loads``
either returns an ``Entry`` or raises ``CorruptEntry`` naming the field, and a beat's
``Dispatcher`` sends the loadable ones, quarantines the rest and keeps sending good entries.
"""

from __future__ import annotations

import base64
import json
import math
import os
import pickle
import uuid
import zoneinfo
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_dispatcher import Unbuffered

from redisbeat import Clocked, Cron, Crontab, Entry, Interval, ScheduleStore, Solar
from redisbeat.beat.loop import Dispatcher
from redisbeat.config import Config
from redisbeat.errors import CorruptEntry
from redisbeat.schedule.timing import from_ms, to_ms
from redisbeat_testkit.redis_server import RedisServer

NAME = "fuzzed"
UTC = timezone.utc
NOW_MS = 1_780_000_000_000  # 2026-05-28

#: One valid entry of every kind, with every field set to something other than its default.
BASES = [
    Entry(NAME, "proj.ping", Interval(60), args=[1, "a"], kwargs={"k": [1.5]}),
    Entry(
        NAME,
        "proj.report",
        Crontab("30", "2", day_of_week="mon-fri", day_of_month="1-7", tz="Europe/Berlin"),
        options={"queue": "reports", "expires": 3600},
        start_at=datetime(2026, 1, 1, tzinfo=UTC),
        end_at=datetime(2030, 1, 1, tzinfo=UTC),
        catch_up="skip",
        grace=30.0,
        description="weekday report",
    ),
    Entry(NAME, "proj.tick", Cron("*/10 * * * * *", tz="Australia/Lord_Howe"), one_off=True),
    Entry(NAME, "proj.once", Clocked(datetime(2026, 12, 1, 9, tzinfo=UTC)), enabled=False),
    Entry(NAME, "proj.dawn", Solar("dawn_civil", 52.52, 13.405), source="config"),
]
ENTRY_FIELDS = set(BASES[0].to_json())


def _with(base: int, **changes: Any) -> str:
    return json.dumps({**BASES[base].to_json(), **changes})


#: Definitions that broke the decoder or a beat before they were fixed (see each comment).
FOUND = [
    # An int beyond any float: OverflowError from math.isfinite, not CorruptEntry.
    _with(0, schedule={"kind": "interval", "every": 10**400, "relative": False}),
    _with(4, schedule={"kind": "solar", "event": "sunrise", "lat": 0, "lon": -(10**400)}),
    # A finite interval whose milliseconds are not: OverflowError in every next_due_ms.
    _with(0, schedule={"kind": "interval", "every": 1.7e308, "relative": False}),
    # Instants a UTC datetime cannot hold: loaded, then OverflowError on the way out.
    _with(3, schedule={"kind": "clocked", "at": "9999-12-31T23:59:59-10:00"}),
    _with(3, schedule={"kind": "clocked", "at": "0001-01-01T00:00:00+10:00"}),
    _with(0, start_at="0001-01-01T00:00:00+14:00"),
    # Searches that stepped past year 9999: ValueError out of the beat's tick.
    _with(2, start_at="9999-12-31T23:00:00+00:00", end_at=None),
    _with(4, start_at="9999-12-31T23:00:00+00:00"),
    _with(0, start_at="9999-12-31T23:59:59.999+00:00"),
    # A missing task was reported on the field "definition".
    json.dumps({k: v for k, v in BASES[0].to_json().items() if k != "task"}),
]


def budget(examples: int) -> int:
    """``examples`` scaled by $REDISBEAT_FUZZ_SCALE (say 50 to hunt for bugs locally)."""
    return max(1, round(examples * float(os.environ.get("REDISBEAT_FUZZ_SCALE", "1"))))


# --- what a stored definition may look like -----------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # unbounded: ints beyond any float too
    st.floats(),  # NaN and infinities included: json.dumps writes them, json.loads reads them
    st.text(max_size=20),
    st.sampled_from(["", "*", "0", "60", "2026-12-01T09:00:00+00:00", "2026-12-01T09:00:00"]),
    st.sampled_from(["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00", "interval"]),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
#: Other values of each JSON type, to retype a field with.
RETYPED = st.one_of(
    st.sampled_from(
        [None, True, False, 0, -1, 1.5, -0.0, 10**400, "", "x", [], {}, [None], {"a": 1}]
    ),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 5e-324, 2**63, "x" * 300]),
)


def retype(value: Any) -> st.SearchStrategy[Any]:
    """``value`` as another JSON type: its text, wrapped in a list or an object, or else."""
    return st.one_of(
        st.just(str(value)),
        st.just([value]),
        st.just({"value": value}),
        RETYPED,
    )


def absent_from(target: dict[str, Any]) -> Callable[[str], bool]:
    return lambda key: key not in target


@st.composite
def mutated(draw: st.DrawFn, name: str = NAME) -> tuple[str, list[tuple[str, str, str]]]:
    """A valid definition with 1 to 3 mutations; returns the JSON and what was changed.

    Each change is ``(level, key, op)``: level ``top`` or ``schedule``, op ``drop``,
    ``replace``, ``retype`` or ``add``.
    """
    data = draw(st.sampled_from(BASES)).to_json()
    data["name"] = name
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        level = draw(st.sampled_from(["top", "schedule"]))
        target = data.get("schedule") if level == "schedule" else data
        if not isinstance(target, dict):
            level, target = "top", data
        op = draw(st.sampled_from(["drop", "replace", "retype", "add"]))
        if op == "add":
            key = draw(st.text(min_size=1, max_size=12).filter(absent_from(target)))
            target[key] = draw(JSON_VALUES)
        elif not target:
            continue
        else:
            key = draw(st.sampled_from(sorted(target)))
            if op == "drop":
                del target[key]
            elif op == "replace":
                target[key] = draw(JSON_VALUES)
            else:
                target[key] = draw(retype(target[key]))
        changes.append((level, key, op))
    return json.dumps(data), changes


def objects_with_entry_keys(name: str = NAME) -> st.SearchStrategy[str]:
    """JSON objects with (some of) the entry's keys and arbitrary values."""
    keys = {key: JSON_VALUES for key in ENTRY_FIELDS - {"name", "schedule"}}
    schedule = st.fixed_dictionaries(
        {"kind": st.sampled_from(["interval", "crontab", "cron", "clocked", "solar"])},
        optional={k: JSON_VALUES for k in ["every", "relative", "expr", "tz", "at", "lat"]},
    )
    return st.fixed_dictionaries(
        {"name": st.just(name) | JSON_VALUES, "schedule": schedule | JSON_VALUES}, optional=keys
    ).map(json.dumps)


ERRORS = ["strict", "replace", "ignore", "backslashreplace", "surrogateescape"]


def texts(name: str = NAME) -> st.SearchStrategy[str]:
    """Any text a definition could be: random, random bytes decoded, random or mutated JSON."""
    return st.one_of(
        st.text(),
        st.builds(
            lambda raw, errors: raw.decode("utf-8", errors),
            st.binary(),
            st.sampled_from(ERRORS[1:]),
        ),
        JSON_VALUES.map(json.dumps),
        objects_with_entry_keys(name),
        mutated(name).map(lambda pair: pair[0]),
    )


# --- the decoder --------------------------------------------------------------------------


def load(raw: str | bytes, name: str = NAME) -> Entry | CorruptEntry:
    """Entry.loads, with CorruptEntry returned and checked; anything else escapes."""
    try:
        entry = Entry.loads(raw, name)
    except CorruptEntry as exc:
        assert exc.name == name
        assert (
            exc.field in ENTRY_FIELDS | {"definition"}
            or exc.field == "schedule"
            or exc.field.startswith("schedule.")
        ), exc
        assert str(exc).startswith(f"entry {name!r}: field {exc.field!r}: ")
        return exc
    # What loads is a plain, valid entry: it stores and loads back unchanged, and its timing
    # (what a beat computes after each send) works.
    assert isinstance(entry, Entry)
    assert Entry.loads(entry.dumps(), name) == entry
    for tz in ("UTC", "Australia/Lord_Howe"):
        first = entry.first_due_ms(NOW_MS, tz)
        for due in (NOW_MS, first):
            if due is not None:
                nxt = entry.next_due_ms(due, NOW_MS, tz)
                assert nxt is None or nxt > due
                from_ms(nxt or 0)
    entry.is_missed(NOW_MS - 1, NOW_MS)
    return entry


@settings(max_examples=budget(300), deadline=None)
@given(raw=st.text() | st.text(st.sampled_from('{}[]",:0123456789.eE-+ntrufalsTNIfy\\')))
def test_any_text_loads_or_raises_corrupt_entry(raw: str) -> None:
    load(raw)


@settings(max_examples=budget(200), deadline=None)
@given(raw=st.binary(), errors=st.sampled_from(ERRORS))
def test_any_bytes_load_or_raise_corrupt_entry(raw: bytes, errors: str) -> None:
    if errors == "strict":
        load(raw)  # loads takes bytes as well
    else:
        load(raw.decode("utf-8", errors))


@settings(max_examples=budget(300), deadline=None)
@given(raw=JSON_VALUES.map(json.dumps) | objects_with_entry_keys())
def test_any_json_loads_or_raises_corrupt_entry(raw: str) -> None:
    load(raw)


@pytest.mark.parametrize("raw", FOUND)
def test_the_definitions_fuzzing_found_load_or_raise_corrupt_entry_naming_the_field(
    raw: str,
) -> None:
    got = load(raw)
    data = json.loads(raw)
    if "task" not in data:
        assert isinstance(got, CorruptEntry) and got.field == "task"
    elif data["start_at"] and data["start_at"].startswith("9999"):
        assert isinstance(got, Entry) and got.start_at is not None
        start = to_ms(got.start_at)
        assert got.next_due_ms(start, start) is None  # valid, but nothing is due past 9999
    else:
        assert isinstance(got, CorruptEntry), got
        changed = "start_at" if data["start_at"] != BASES[0].to_json()["start_at"] else ""
        assert got.field in {changed, "schedule.every", "schedule.lon", "schedule.at"}


@settings(max_examples=budget(150), deadline=None)
@given(name=st.text(max_size=250))
def test_any_entry_name_loads_or_is_corrupt_naming_the_name(name: str) -> None:
    got = load(json.dumps({**BASES[0].to_json(), "name": name}), name)
    if isinstance(got, CorruptEntry):
        assert got.field == "name"
    else:
        assert got.name == name


ZONE_NAMES = sorted(zoneinfo.available_timezones())


@settings(max_examples=budget(150), deadline=None)
@given(
    tz=st.text(max_size=40)
    | st.sampled_from(ZONE_NAMES)
    | st.builds(
        "{}{}".format, st.sampled_from(ZONE_NAMES), st.sampled_from(["/", "/..", "\x00", " "])
    )
    | st.sampled_from(
        ["", ".", "..", "/", "Europe", "../zoneinfo/UTC", "/etc/localtime", "zone.tab"]
    )
)
def test_any_zone_name_loads_or_is_corrupt_naming_the_zone(tz: str) -> None:
    schedule = {"kind": "cron", "expr": "0 9 * * *", "tz": tz}
    got = load(json.dumps({**BASES[0].to_json(), "schedule": schedule}))
    if isinstance(got, CorruptEntry):
        assert got.field == "schedule.tz"
    else:
        assert got.schedule == Cron("0 9 * * *", tz=tz)


def test_deeply_nested_json_is_corrupt_not_a_crash() -> None:
    for depth in (10_000, 100_000):
        nested = "[" * depth + "]" * depth
        for raw in (nested, f'{{"name": "{NAME}", "task": "t", "args": {nested}}}'):
            got = load(raw)
            assert isinstance(got, CorruptEntry)


@settings(max_examples=budget(500), deadline=None)
@given(case=mutated())
def test_a_mutated_definition_loads_or_is_corrupt_naming_the_mutated_field(
    case: tuple[str, list[tuple[str, str, str]]],
) -> None:
    raw, changes = case
    got = load(raw)
    if len(changes) == 1:
        check_names_the_change(got, *changes[0])


def check_names_the_change(got: Entry | CorruptEntry, level: str, key: str, op: str) -> None:
    """A definition with one field changed is corrupt on that field, if at all."""
    if isinstance(got, Entry):
        return
    if level == "top":
        assert op != "add", "an unknown key is ignored"
        allowed = {key} | ({"end_at"} if key == "start_at" else set())
        assert got.field in allowed or (key == "schedule" and got.field.startswith("schedule")), (
            got,
            key,
            op,
        )
    else:
        # A different kind has other fields; a crontab's days can stop meeting at all.
        assert key == "kind" or got.field in {f"schedule.{key}", "schedule.day_of_month"}, (
            got,
            key,
            op,
        )


EVERY_OTHER_TYPE: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    math.nan,
    -math.inf,
    10**400,
    "",
    "x",
    [],
    {},
]


@pytest.mark.parametrize("base", BASES, ids=lambda e: type(e.schedule).__name__)
def test_every_field_dropped_or_retyped_loads_or_is_corrupt_naming_that_field(
    base: Entry,
) -> None:
    definition = base.to_json()
    for level in ("top", "schedule"):
        target = definition if level == "top" else definition["schedule"]
        for key in list(target):
            value = target.pop(key)
            check_names_the_change(load(json.dumps(definition)), level, key, "drop")
            for other in [*EVERY_OTHER_TYPE, str(value), [value], {"value": value}]:
                target[key] = other
                check_names_the_change(load(json.dumps(definition)), level, key, "retype")
            target[key] = value
        target["unknown"] = [1]
        got = load(json.dumps(definition))
        if level == "top":
            assert isinstance(got, Entry)  # a key from a newer release is ignored
        else:
            assert isinstance(got, CorruptEntry) and got.field == "schedule.unknown"
        del target["unknown"]
    assert load(json.dumps(definition)) == base


def test_required_fields_are_named_when_missing() -> None:
    for key in ("name", "task", "schedule"):
        data = BASES[0].to_json()
        del data[key]
        got = load(json.dumps(data))
        assert isinstance(got, CorruptEntry) and got.field == key


def test_a_retyped_field_is_named() -> None:
    cases = {
        "task": 5,
        "args": {"a": 1},
        "kwargs": [1],
        "options": "queue",
        "enabled": "yes",
        "start_at": 1764576000,
        "end_at": "tomorrow",
        "one_off": None,
        "catch_up": ["once"],
        "grace": "5",
        "source": "",
        "description": 0,
    }
    for key, value in cases.items():
        got = load(json.dumps({**BASES[0].to_json(), key: value}))
        assert isinstance(got, CorruptEntry) and got.field == key, (key, got)
    got = load(
        json.dumps(
            {
                **BASES[0].to_json(),
                "schedule": {"kind": "interval", "every": 10**400, "relative": False},
            }
        )
    )
    assert isinstance(got, CorruptEntry) and got.field == "schedule.every"


# --- hostile but valid JSON ---------------------------------------------------------------


class _Payload:
    """Pickles to a call that would create the marker directory when unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (str(self.marker),))


def hostile(marker: Path, name: str) -> list[str]:
    """Definitions that would run code if anything unpickled or object-decoded them."""
    pickled = base64.b64encode(pickle.dumps(_Payload(marker))).decode()
    good = {**BASES[0].to_json(), "name": name}
    jsonpickle = {
        "py/reduce": [{"py/function": "os.mkdir"}, {"py/tuple": [str(marker)]}],
        "py/object": "os.system",
    }
    return [
        json.dumps({**good, "args": [pickled], "kwargs": {"payload": pickled, **jsonpickle}}),
        json.dumps({**good, "kwargs": {"__reduce__": [["os", "mkdir"], [str(marker)]]}}),
        json.dumps({**good, "__reduce__": pickled, "py/object": "os.system", "!!python": "x"}),
        json.dumps({**good, "options": {"serializer": "pickle", "py/reduce": jsonpickle}}),
        json.dumps({**good, "schedule": {**jsonpickle, "kind": "interval"}}),
        json.dumps({**good, "schedule": {"kind": "__import__('os').system('true')"}}),
        json.dumps({**good, "schedule": pickled}),
        json.dumps({**jsonpickle, "name": name}),
        json.dumps({"py/object": "redisbeat.entry.Entry", "name": name, "task": "t"}),
        pickled,
        pickle.dumps(_Payload(marker)).decode("latin-1"),
    ]


def test_hostile_definitions_load_as_plain_data_or_are_corrupt_and_run_nothing(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "executed"
    outcomes = [load(raw) for raw in hostile(marker, NAME)]
    assert not marker.exists()
    loaded = [o for o in outcomes if isinstance(o, Entry)]
    assert [type(o).__name__ for o in outcomes] == ["Entry"] * 4 + ["CorruptEntry"] * 7
    pickled = base64.b64encode(pickle.dumps(_Payload(marker))).decode()
    assert loaded[0].args == (pickled,) and loaded[0].kwargs["payload"] == pickled
    assert loaded[1].kwargs == {"__reduce__": [["os", "mkdir"], [str(marker)]]}
    assert loaded[2].to_json() == BASES[0].to_json()  # unknown keys ignored
    assert loaded[3].options["py/reduce"]["py/object"] == "os.system"


# --- inside a running dispatcher ----------------------------------------------------------


class Recorder:
    """A publish callable that remembers what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    def __call__(self, entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
        assert isinstance(entry, Entry)
        self.sent.append((entry.name, due_ms))


@pytest.fixture(scope="module")
def clients(redis_server: RedisServer) -> Iterator[tuple[redis.Redis, redis.Redis]]:
    """A client as a beat makes it (text, non-UTF-8 kept as surrogates) and a raw one."""
    text = redis.Redis.from_url(
        redis_server.url(), decode_responses=True, encoding_errors="surrogateescape"
    )
    raw = redis.Redis.from_url(redis_server.url())
    yield text, raw
    text.close()
    raw.close()


GOOD = [
    Entry("good-interval", "proj.ping", Interval(3600)),
    Entry("good-cron", "proj.ping", Cron("0 0 1 1 *", tz="Asia/Kathmandu")),
    Entry("good-clocked", "proj.ping", Clocked(datetime(2026, 1, 1, tzinfo=UTC))),
]


def run_beat(store: ScheduleStore, names: list[str], ticks: int = 3) -> Recorder:
    """Make ``names`` due a moment ago and run an in-process beat for a few ticks."""
    now = store.now_ms()
    store.client.zadd(store.keys.schedule, dict.fromkeys(names, now - 1))
    recorder = Recorder()
    config = Config(redis_url="redis://unused", key_prefix=store.keys.prefix)
    beat = Dispatcher(store, config, Unbuffered(recorder))
    for _ in range(ticks):
        assert beat.tick() >= 0
    return recorder


def check_outcome(store: ScheduleStore, sent: list[str], stored: dict[str, str | bytes]) -> None:
    """Every stored definition was sent (or skipped as too late) or set aside, as it loads."""
    quarantined = store.quarantined()
    for name, raw in stored.items():
        got = load(raw, name)
        if isinstance(got, CorruptEntry):
            assert name in quarantined and name not in sent, (name, raw)
            assert f"field {got.field!r}" in quarantined[name].error
            assert quarantined[name].definition.encode("utf-8", "surrogateescape") == (
                raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
            )
            assert name not in store
        else:
            assert name not in quarantined, (name, raw)
            # Sent, unless its grace is so short that the few ms since it fell due are too many.
            assert name in sent or got.is_missed(0, 60_000), (name, raw)


@settings(max_examples=budget(20), deadline=None)
@given(fuzzed=st.lists(texts("fuzz") | st.binary(), min_size=1, max_size=4))
@example(fuzzed=[raw.replace(f'"{NAME}"', '"fuzz"', 1) for raw in FOUND])
def test_a_beat_sends_or_sets_aside_every_fuzzed_definition_and_keeps_sending_good_ones(
    clients: tuple[redis.Redis, redis.Redis], fuzzed: list[str | bytes]
) -> None:
    text, raw = clients
    store = ScheduleStore(text, prefix=f"fuzz-{uuid.uuid4().hex[:10]}")
    store.upsert_many(GOOD)
    stored: dict[str, str | bytes] = {}
    for i, definition in enumerate(fuzzed):
        name = f"fuzz-{i}"
        # Loadable mutations name themselves "fuzz"; give each its own name.
        if isinstance(definition, str) and definition.startswith('{"name": "fuzz"'):
            definition = definition.replace('"fuzz"', json.dumps(name), 1)
        stored[name] = definition
        if isinstance(definition, bytes):
            raw.hset(store.keys.entries, name, definition)
        else:
            raw.hset(store.keys.entries, name, definition.encode("utf-8", "surrogateescape"))
    recorder = run_beat(store, [*stored, *(g.name for g in GOOD)])
    sent = [name for name, _ in recorder.sent]
    assert sorted(n for n in sent if n.startswith("good-")) == sorted(g.name for g in GOOD)
    check_outcome(store, sent, stored)
    text.delete(*text.scan_iter(f"{{{store.keys.prefix}}}:*"))


def test_a_beat_sets_aside_hostile_definitions_and_runs_nothing(
    clients: tuple[redis.Redis, redis.Redis], tmp_path: Path
) -> None:
    text, raw = clients
    store = ScheduleStore(text, prefix=f"fuzz-{uuid.uuid4().hex[:10]}")
    store.upsert_many(GOOD)
    marker = tmp_path / "executed"
    stored: dict[str, str | bytes] = {}
    for i in range(len(hostile(marker, "x"))):
        name = f"hostile-{i}"
        definition = hostile(marker, name)[i]
        stored[name] = definition
        raw.hset(store.keys.entries, name, definition.encode("utf-8", "surrogateescape"))
    stored["not-utf8"] = pickle.dumps(_Payload(marker))
    raw.hset(store.keys.entries, "not-utf8", stored["not-utf8"])
    recorder = run_beat(store, [*stored, *(g.name for g in GOOD)])
    assert not marker.exists()
    sent = [name for name, _ in recorder.sent]
    assert sorted(sent) == sorted([*(g.name for g in GOOD), *(f"hostile-{i}" for i in range(4))])
    check_outcome(store, sent, stored)
    assert len(store.quarantined()) == len(stored) - 4
