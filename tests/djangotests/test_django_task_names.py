"""The admin's task field is checked against the Celery app's registered tasks, against a real
Redis: an unregistered name is an error on the field unless the check box or the setting
lets it through, and a name left as it was is not checked again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from test_django_admin import ADD, change_url, form_data, make

from redisbeat_django.conf import reset_store
from redisbeat_django.models import PeriodicTask
from redisbeat_testkit.djangosite.celery_app import app as celery_app

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def check_off(rb_store: object) -> Iterator[None]:
    celery_app.conf.redisbeat_check_task_names = False
    reset_store()
    yield
    celery_app.conf.pop("redisbeat_check_task_names")
    reset_store()


def test_an_unregistered_task_is_an_error_on_its_field_naming_the_close_ones(
    admin_client, rb_store
):
    response = admin_client.post(ADD, form_data(task="reports.dialy"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["task"]
    assert errors["task"] == [
        "app 'djangotests' registers no task 'reports.dialy' (did you mean 'reports.daily'?); "
        "correct the name, or tick \u201cSkip the task name check\u201d if only the workers "
        "import this task"
    ]
    assert not PeriodicTask.objects.exists() and "report" not in rb_store


def test_the_check_box_saves_a_task_only_the_workers_import(admin_client, rb_store):
    refused = admin_client.post(ADD, form_data(task="workers.only"))
    assert "registers no task 'workers.only'" in refused.context["adminform"].form.errors["task"][0]
    response = admin_client.post(ADD, form_data(task="workers.only", unregistered_ok="on"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert rb_store.get("report").task == "workers.only"


def test_a_task_name_left_as_it_was_is_not_checked_again(admin_client, rb_store):
    row = make(task="workers.only")
    changed = admin_client.post(change_url(row), form_data(task="workers.other"))
    assert (
        "registers no task 'workers.other'" in changed.context["adminform"].form.errors["task"][0]
    )
    response = admin_client.post(change_url(row), form_data(task="workers.only", every="60"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert PeriodicTask.objects.get().every == 60


def test_the_setting_turns_the_check_off(admin_client, rb_store, check_off):
    response = admin_client.post(ADD, form_data(task="workers.only"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert rb_store.get("report").task == "workers.only"


def test_the_check_box_is_shown_to_those_who_may_save(admin_client, rb_store):
    row = make()
    assert "Skip the task name check" in admin_client.get(ADD).content.decode()
    assert "Skip the task name check" in admin_client.get(change_url(row)).content.decode()
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    view = Permission.objects.get(
        codename="view_periodictask", content_type__app_label="redisbeat_django"
    )
    user.user_permissions.add(view)
    viewer = Client()
    viewer.force_login(user)
    page = viewer.get(change_url(row)).content.decode()
    assert "Schedule preview" in page and "Skip the task name check" not in page
