"""The hot path's caches: parsed entries by definition, bounded."""

from __future__ import annotations

import itertools
import uuid

import pytest
from celery import Celery
from hypothesis import given
from hypothesis import strategies as st

from redisbeat import Entry, Interval
from redisbeat.config import Config
from redisbeat.errors import ConfigurationError, CorruptEntry
from redisbeat.schedule.cache import ADMIT_EVERY, LRU, EntryCache
from redisbeat.schedule.ids import OCCURRENCE_NAMESPACE, occurrence_id


def definition(name: str, every: float = 60) -> str:
    return Entry(name, "proj.ping", Interval(every), kwargs={"x": [1, 2]}).dumps()


def test_the_same_definition_gives_the_same_entry_object_without_parsing_it_again():
    cache = EntryCache(10)
    first = cache.load(definition("e"), "e")
    assert cache.load(definition("e"), "e") is first  # an equal string, not the same object
    assert first == Entry.loads(definition("e"), "e")


def test_an_edited_definition_is_parsed_afresh():
    cache = EntryCache(10)
    before = cache.load(definition("e", 60), "e")
    after = cache.load(definition("e", 30), "e")
    assert after is not before and after.schedule == Interval(30)


def test_the_cache_keeps_at_most_its_size_dropping_the_least_recently_used():
    cache = EntryCache(3)
    kept = cache.load(definition("a"), "a")
    for name in ("b", "c"):
        cache.load(definition(name), name)
    cache.load(definition("a"), "a")  # used again: "b" is now the oldest
    for i in range(1000):
        cache.load(definition(f"n{i}"), f"n{i}")
        assert len(cache) <= 3
    assert cache.load(definition("a"), "a") is not kept  # dropped long since


def test_a_cache_of_size_zero_keeps_nothing():
    cache = EntryCache(0)
    assert cache.load(definition("e"), "e") is not cache.load(definition("e"), "e")
    assert len(cache) == 0


def test_a_definition_stored_under_another_name_still_fails_the_name_check():
    cache = EntryCache(10)
    cache.load(definition("a"), "a")
    with pytest.raises(CorruptEntry, match="does not match the key"):
        cache.load(definition("a"), "b")


def test_a_corrupt_definition_raises_every_time_and_is_not_kept():
    cache = EntryCache(10)
    for _ in range(2):
        with pytest.raises(CorruptEntry):
            cache.load("{not json", "e")
    assert len(cache) == 0


def test_an_lru_moves_what_it_returns_to_the_back():
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1
    for _ in range(ADMIT_EVERY):
        lru.put("c", 3)
    assert (lru.get("a"), lru.get("b"), lru.get("c")) == (1, None, 3)


def test_a_full_lru_takes_in_one_new_key_in_admit_every_in_place_of_the_least_recently_used():
    lru: LRU[str, int] = LRU(2)
    assert lru.put("a", 1) and lru.put("b", 2)
    lru.get("a")
    turned_away = [lru.put(f"n{i}", i) for i in range(ADMIT_EVERY - 1)]
    assert not any(turned_away)
    assert (lru.get("a"), lru.get("b"), len(lru)) == (1, 2, 2)
    assert lru.put("b", 20)  # a key it holds is always updated
    assert lru.put("last", 0)
    assert (lru.get("a"), lru.get("b"), lru.get("last")) == (None, 20, 0)


def test_entries_that_come_round_in_a_cycle_longer_than_the_cache_keep_hitting_what_it_holds():
    # 500 entries fired in turn through a cache of 100: a plain LRU would drop each one
    # before it came back and never hit; this one keeps (nearly) the same 100 each round.
    cache = EntryCache(100)
    definitions = [(definition(f"e{i}"), f"e{i}") for i in range(500)]
    rounds = [[cache.load(d, name) for d, name in definitions] for _ in range(4)]
    for before, after in itertools.pairwise(rounds):
        same = sum(a is b for a, b in zip(before, after, strict=True))
        assert 100 - 500 // ADMIT_EVERY <= same <= 100
    assert len(cache) == 100


def test_an_entry_that_stops_coming_is_the_first_replaced():
    cache = EntryCache(2)
    gone = cache.load(definition("edited", 60), "edited")
    kept = cache.load(definition("k"), "k")
    for _ in range(ADMIT_EVERY):
        assert cache.load(definition("k"), "k") is kept
        cache.load(definition("edited", 30), "edited")  # its new definition
    assert cache.load(definition("edited", 60), "edited") is not gone
    assert cache.load(definition("k"), "k") is kept


@given(st.text(max_size=20), st.text(min_size=1, max_size=40), st.integers(0, 2**53))
def test_occurrence_ids_are_the_uuid5_of_prefix_name_and_due_time(prefix, name, due_ms):
    try:
        expected = str(uuid.uuid5(OCCURRENCE_NAMESPACE, f"{prefix}\x00{name}\x00{due_ms}"))
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            occurrence_id(prefix, name, due_ms)
        return
    assert occurrence_id(prefix, name, due_ms) == expected


@pytest.mark.parametrize("size", [-1, 1.5, True, "10"])
def test_a_cache_size_that_is_not_a_non_negative_integer_is_refused(size):
    with pytest.raises(ConfigurationError, match="redisbeat_entry_cache_size"):
        Config(redis_url="redis://localhost", entry_cache_size=size)


def test_the_cache_size_comes_from_the_celery_setting():
    app = Celery("cachesize", broker="redis://localhost", set_as_current=False)
    assert Config.from_app(app).entry_cache_size == 10_000
    app.conf.redisbeat_entry_cache_size = 0
    assert Config.from_app(app).entry_cache_size == 0
