"""Task names checked against the Celery app by every writer that knows it: the command line
(``add``, ``import``, ``quarantine restore``), ``beat_schedule`` and ``redisbeat.delay``,
against a real Redis and real Celery apps (the Django admin's form is in djangotests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from celery import Celery
from test_cli import celery_cli, quarantine_one

import redisbeat
from redisbeat.config import Config
from redisbeat.delaying import store_for
from redisbeat.errors import ConfigurationError, InvalidEntry
from redisbeat.schedule.from_celery import config_entries, read_config
from redisbeat.schedule.task_names import registered_tasks
from redisbeat_testkit.ports import wait_until
from redisbeat_testkit.processes import environ_without_django
from redisbeat_testkit.redis_server import RedisServer

TYPO = "app 'proj' registers no task 'proj.pnig' (did you mean 'proj.ping'?)"


# -- the command line -------------------------------------------------------------------------


def test_add_refuses_a_task_the_app_does_not_register_and_names_the_close_ones(
    redis_server, prefix, store
):
    refused = celery_cli(redis_server, prefix, "add", "noTask", "proj.pnig", "--every", "3s")
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.strip() == (
        f"Error: entry 'noTask': field 'task': {TYPO}; correct the name, or pass "
        "--unregistered-ok if only the workers import this task"
    )
    assert "noTask" not in store
    unknown = celery_cli(redis_server, prefix, "add", "a", "proj.does_not_exist", "--every", "3s")
    assert unknown.returncode == 1 and "did you mean" not in unknown.stderr
    allowed = celery_cli(
        redis_server, prefix, "add", "noTask", "proj.pnig", "--every", "3s", "--unregistered-ok"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert store.get("noTask").task == "proj.pnig"


def test_add_refuses_arguments_the_tasks_signature_refuses_as_each_send_would(
    redis_server, prefix, store
):
    refused = celery_cli(redis_server, prefix, "add", "s", "proj.strict", "--every", "3s")
    assert refused.returncode == 1, refused.stdout
    assert "entry 's': field 'args': task 'proj.strict' refuses them: " in refused.stderr
    assert "missing 1 required positional argument: 'x'" in refused.stderr and "s" not in store
    taken = celery_cli(
        redis_server, prefix, "add", "s", "proj.strict", "--every", "3s", "--args", "[1]"
    )
    assert taken.returncode == 0, taken.stderr
    assert store.get("s").args == (1,)


def test_import_reports_each_unknown_task_with_its_line_and_writes_nothing(
    redis_server, prefix, store, tmp_path
):
    path = tmp_path / "entries.json"
    every = {"kind": "interval", "every": 60}
    documents = [
        {"name": "fine", "task": "proj.ping", "schedule": every},
        {"name": "typo", "task": "proj.pnig", "schedule": every},
        {"name": "other", "task": "proj.nothing_like_it", "schedule": every},
    ]
    path.write_text("[\n" + ",\n".join(json.dumps(d) for d in documents) + "\n]\n")
    refused = celery_cli(redis_server, prefix, "import", str(path), "--dry-run")
    assert refused.returncode == 1
    assert f"line 3, entry 2: entry 'typo': field 'task': {TYPO}" in refused.stderr
    assert "line 4, entry 3: entry 'other': field 'task'" in refused.stderr
    assert len(store) == 0
    allowed = celery_cli(redis_server, prefix, "import", str(path), "--unregistered-ok")
    assert allowed.returncode == 0, allowed.stderr
    assert {e.name for e in store} == {"fine", "typo", "other"}


def test_quarantine_restore_checks_the_fixed_task_name(redis_server, prefix, store, tmp_path):
    quarantine_one(store, "q", json.dumps({"name": "q", "schedule": {"kind": "interval"}}))
    fixed = tmp_path / "q.json"
    fixed.write_text(
        json.dumps({"name": "q", "task": "proj.pnig", "schedule": {"kind": "interval", "every": 5}})
    )
    restore = ("quarantine", "restore", "q", "--file", str(fixed))
    refused = celery_cli(redis_server, prefix, *restore)
    assert refused.returncode == 1 and TYPO in refused.stderr
    assert "q" in store.quarantined()
    allowed = celery_cli(redis_server, prefix, *restore, "--unregistered-ok")
    assert allowed.returncode == 0, allowed.stderr
    assert store.get("q").task == "proj.pnig" and "q" not in store.quarantined()


LAZY_PROJECT = {
    "lazyproj/__init__.py": "",
    "lazyproj/app.py": """
        import os

        from celery import Celery

        app = Celery("lazyproj")
        app.conf.broker_url = os.environ["TEST_BROKER_URL"]
        app.conf.redisbeat_redis_url = os.environ["TEST_STORE_URL"]
        app.conf.redisbeat_key_prefix = os.environ["TEST_PREFIX"]
        app.conf.imports = ["lazyproj.jobs"]
        app.autodiscover_tasks(["lazyproj.billing"])
        """,
    "lazyproj/jobs.py": """
        from lazyproj.app import app

        @app.task(name="lazyproj.report")
        def report():
            pass
        """,
    "lazyproj/billing/__init__.py": "",
    "lazyproj/billing/tasks.py": """
        from celery import shared_task

        @shared_task(name="billing.invoice")
        def invoice():
            pass
        """,
}


def test_tasks_a_project_registers_lazily_are_known_as_a_worker_knows_them(
    redis_server, prefix, store, tmp_path
):
    for name, source in LAZY_PROJECT.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(source))

    def add(name: str, task: str) -> subprocess.CompletedProcess[str]:
        command = ["-m", "celery", "-A", "lazyproj.app", "redisbeat", "add", name, task]
        return subprocess.run(
            [sys.executable, *command, "--every", "1m"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={
                **environ_without_django(),
                "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
                "TEST_BROKER_URL": redis_server.url(1),
                "TEST_STORE_URL": redis_server.url(0),
                "TEST_PREFIX": prefix,
            },
        )

    assert add("report", "lazyproj.report").returncode == 0  # through the app's imports
    assert add("invoice", "billing.invoice").returncode == 0  # through autodiscover_tasks
    typo = add("typo", "billing.invoic")
    assert typo.returncode == 1 and "(did you mean 'billing.invoice'?)" in typo.stderr
    assert {e.name for e in store} == {"report", "invoice"}


# -- beat_schedule ----------------------------------------------------------------------------


def proj_app(**conf: object) -> Celery:
    app = Celery("proj", set_as_current=False)
    app.conf.update(result_expires=None, **conf)  # no celery.backend_cleanup entry

    @app.task(name="proj.ping", shared=False)
    def ping() -> None:
        pass

    return app


SCHEDULE = {
    "fine": {"task": "proj.ping", "schedule": 60.0},
    "typo": {"task": "proj.pnig", "schedule": 60.0},
}


def test_a_beat_schedule_item_naming_an_unregistered_task_makes_no_entry(monkeypatch):
    app = proj_app(beat_schedule=SCHEDULE)
    imported: list[int] = []  # the app's task modules, imported once, as a beat does
    monkeypatch.setattr(app.loader, "import_default_modules", lambda: imported.append(1))
    with pytest.raises(InvalidEntry) as raised:
        config_entries(app, tasks=registered_tasks(app))
    assert (raised.value.name, raised.value.field) == ("typo", "task")
    assert str(raised.value) == (
        f"entry 'typo': field 'task': {TYPO}; correct the name, or set "
        "redisbeat_check_task_names = False if only the workers import this task"
    )
    entries, bad = read_config(app, registered_tasks(app))
    assert [e.name for e in entries] == ["fine"] and [b.name for b in bad] == ["typo"]
    assert imported == [1]
    # Kept with the check off, without the tasks, or where the app registers none of its own.
    off = proj_app(beat_schedule=SCHEDULE, redisbeat_check_task_names=False)
    assert {e.name for e in config_entries(off, tasks=registered_tasks(off))} == set(SCHEDULE)
    on = proj_app(beat_schedule=SCHEDULE)
    assert {e.name for e in config_entries(on)} == set(SCHEDULE)
    assert len(config_entries(on, tasks={"celery.chord", "celery.chain"})) == 2


def test_a_beat_logs_the_unregistered_task_of_its_beat_schedule_and_does_not_store_it(
    redis_server, prefix, store, beats_for
):
    beats = beats_for(redis_server, prefix)
    [beat] = beats.start(1, TEST_BEAT_SCHEDULE=json.dumps(SCHEDULE))
    wait_until(lambda: TYPO in beat.output(), 30, "the beat to name the unregistered task")
    assert "entry 'typo': field 'task'" in beat.output()
    assert "redisbeat_check_task_names = False" in beat.output()
    assert "typo" not in store


# -- redisbeat.delay and the setting ----------------------------------------------------------


def test_delay_names_the_close_tasks_and_the_setting_lets_a_name_through(
    redis_server: RedisServer, prefix: str
):
    app = proj_app(redisbeat_redis_url=redis_server.url(), redisbeat_key_prefix=prefix)
    try:
        with pytest.raises(InvalidEntry, match=r"did you mean 'proj\.ping'\?"):
            redisbeat.delay(app, "proj.pnig", countdown=60, key="k")
        app.conf.redisbeat_check_task_names = False
        assert redisbeat.delay(app, "proj.pnig", countdown=60, key="k") == "k"
    finally:
        store_for(app).close()


def test_the_setting_must_be_true_or_false():
    app = proj_app(redisbeat_redis_url="redis://localhost/0", redisbeat_check_task_names="no")
    with pytest.raises(ConfigurationError, match="redisbeat_check_task_names must be True"):
        Config.from_app(app)
    assert Config.from_app(proj_app(redisbeat_redis_url="redis://x/0")).check_task_names is True
