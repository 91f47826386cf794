"""The admin shows what is wrong with an entry in Redis (a refused send, an entry set aside,
data redisbeat did not write) instead of failing, and saving the entry releases it."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from test_dispatcher import Unbuffered
from test_django_admin import CHANGELIST, change_url, form_data, make

from redisbeat import ScheduleStore
from redisbeat.beat.loop import Dispatcher
from redisbeat.config import Config
from redisbeat.errors import MessageRefused
from redisbeat.schedule.entry import Entry
from redisbeat.schedule.timing import valid_ms

pytestmark = pytest.mark.django_db(transaction=True)


def refuse(entry: Entry, task_id: str, due_ms: int, now_ms: int) -> None:
    raise MessageRefused(entry.name, "TypeError: report() got an unexpected keyword 'y'")


def fail_sends(store: ScheduleStore, name: str, times: int) -> None:
    """Sends of ``name`` refused ``times`` times, by a beat in this process."""
    config = Config(redis_url="redis://unused", key_prefix=store.keys.prefix)
    beat = Dispatcher(store, config, Unbuffered(refuse))
    for _ in range(times):
        store.client.zadd(store.keys.schedule, {name: store.now_ms() - 5})
        beat._claim_by = 0
        beat.tick()


def test_a_refused_send_shows_on_the_entry_and_a_set_aside_entry_is_released_by_saving(
    admin_client, rb_store
):
    row = make(every=3600)
    fail_sends(rb_store, row.name, 1)
    html = admin_client.get(CHANGELIST).content.decode()
    assert "1 failed" in html
    html = admin_client.get(change_url(row)).content.decode()
    assert "The last 1 send failed:" in html and "unexpected keyword" in html

    fail_sends(rb_store, row.name, 2)  # three in a row: set aside
    assert row.name in rb_store.quarantined() and row.name not in rb_store
    assert "set aside" in admin_client.get(CHANGELIST).content.decode()
    html = admin_client.get(change_url(row)).content.decode()
    assert "Set aside" in html and "its last 3 sends failed" in html
    assert "saving this periodic task releases it" in html

    response = admin_client.post(change_url(row), form_data(every="3600"))
    assert response.status_code == 302
    assert row.name in rb_store and row.name not in rb_store.quarantined()


def test_a_due_time_redisbeat_did_not_write_shows_on_the_entry_instead_of_an_error(
    admin_client, rb_store
):
    row = make(every=3600)
    rb_store.client.zadd(rb_store.keys.schedule, {row.name: float("inf")})
    for url in (CHANGELIST, change_url(row)):
        response = admin_client.get(url)
        assert response.status_code == 200
        assert "not a valid time (inf)" in response.content.decode()
    assert "needs repair" in admin_client.get(CHANGELIST).content.decode()


def test_redisbeat_sync_puts_an_entry_whose_due_time_is_impossible_back_on_its_schedule(
    rb_store,
):
    row = make(every=3600)
    rb_store.client.zadd(rb_store.keys.schedule, {row.name: float("inf")})
    out = io.StringIO()
    call_command("redisbeat_sync", stdout=out)
    assert f"updated: {row.name}" in out.getvalue() and "0 unchanged" in out.getvalue()
    assert valid_ms(rb_store.client.zscore(rb_store.keys.schedule, row.name))
