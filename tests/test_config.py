"""Settings: read from Celery's configuration, validated at startup."""

from __future__ import annotations

import logging
import sys
import types
import uuid

import pytest
from celery import Celery

from redisbeat.config import Config
from redisbeat.errors import ConfigurationError


def app_with(**conf: object) -> Celery:
    app = Celery("settings-test", set_as_current=False)
    app.conf.update(conf)
    return app


def test_the_store_defaults_to_a_redis_broker_url_and_celerys_time_zone():
    config = Config.from_app(app_with(broker_url="redis://h:6379/2", timezone="Europe/Berlin"))
    assert config.redis_url == "redis://h:6379/2"
    assert config.timezone == "Europe/Berlin"
    assert (config.key_prefix, config.lease_seconds, config.batch_size) == ("redisbeat", 5.0, 100)


def test_a_non_redis_broker_without_a_redis_url_stops_startup_with_a_clear_error():
    with pytest.raises(ConfigurationError, match="redisbeat_redis_url is not set") as info:
        Config.from_app(app_with(broker_url="amqp://guest:secret@rabbit//"))
    assert "secret" not in str(info.value)


def test_every_setting_is_read():
    config = Config.from_app(
        app_with(
            broker_url="amqp://",
            redisbeat_redis_url="rediss://user:pw@h:6380/0",
            redisbeat_key_prefix="prod",
            redisbeat_lease_seconds=5,
            redisbeat_batch_size=500,
            redisbeat_heartbeat_seconds=2,
            redisbeat_socket_timeout=3,
            redisbeat_redis_options={"ssl_ca_certs": "/ca.pem"},
            beat_max_loop_interval=7,
        )
    )
    assert config.redis_url == "rediss://user:pw@h:6380/0" and config.key_prefix == "prod"
    assert (config.lease_seconds, config.batch_size, config.heartbeat_seconds) == (5, 500, 2)
    assert config.max_loop_interval == 7
    assert config.redis_options == {
        "ssl_ca_certs": "/ca.pem",
        "socket_timeout": 3,
        "socket_connect_timeout": 5.0,
    }


def test_a_tls_broker_lends_its_certificate_options_to_the_store():
    ssl = {"ssl_cert_reqs": "required", "ssl_ca_certs": "/ca.pem"}
    config = Config.from_app(app_with(broker_url="rediss://h:6380/0", broker_use_ssl=ssl))
    assert config.redis_options["ssl_ca_certs"] == "/ca.pem"


def test_a_misspelt_setting_is_rejected_with_a_suggestion():
    with pytest.raises(ConfigurationError, match="did you mean redisbeat_lease_seconds"):
        Config.from_app(app_with(broker_url="redis://", redisbeat_lease_second=5))


def test_django_settings_of_redisbeat_django_are_not_mistaken_for_misspellings():
    # Celery configured from django.conf:settings sees every Django setting.
    config = Config.from_app(app_with(broker_url="redis://", REDISBEAT_CELERY_APP="proj:app"))
    assert config.redis_url == "redis://"


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("redisbeat_lease_seconds", 0),
        ("redisbeat_batch_size", 0),
        ("redisbeat_batch_size", 2.5),
        ("redisbeat_key_prefix", "{x}"),
        ("redisbeat_redis_url", "http://example"),
    ],
)
def test_bad_values_are_rejected_naming_the_setting(setting, value):
    with pytest.raises(ConfigurationError, match=setting):
        Config.from_app(app_with(broker_url="redis://", **{setting: value}))


def django_namespaced_app(**settings: object) -> Celery:
    """An app configured as Django projects do: from a settings module, namespace CELERY."""
    module = types.ModuleType(f"settings_{uuid.uuid4().hex}")
    module.CELERY_BROKER_URL = "redis://localhost:6379/0"  # type: ignore[attr-defined]
    module.REDISBEAT_CELERY_APP = "proj.celery:app"  # type: ignore[attr-defined]
    for name, value in settings.items():
        setattr(module, name, value)
    sys.modules[module.__name__] = module
    app = Celery("django_proj", set_as_current=False)
    app.config_from_object(module.__name__, namespace="CELERY")
    return app


def test_settings_in_djangos_celery_namespace_are_read_and_misspellings_rejected():
    app = django_namespaced_app(CELERY_REDISBEAT_LEASE_SECONDS=7)
    assert Config.from_app(app).lease_seconds == 7
    misspelt = django_namespaced_app(CELERY_REDISBEAT_LEASE_SECOND=7)
    with pytest.raises(
        ConfigurationError,
        match="unknown setting CELERY_REDISBEAT_LEASE_SECOND; "
        "did you mean CELERY_REDISBEAT_LEASE_SECONDS",
    ):
        Config.from_app(misspelt)


def test_an_upper_case_redisbeat_setting_celery_would_ignore_is_rejected_saying_how_to_spell_it():
    namespaced = django_namespaced_app(REDISBEAT_LEASE_SECONDS=7)
    with pytest.raises(
        ConfigurationError, match="reads this one as CELERY_REDISBEAT_LEASE_SECONDS"
    ):
        Config.from_app(namespaced)
    plain = app_with(broker_url="redis://", REDISBEAT_LEASE_SECONDS=7)
    with pytest.raises(ConfigurationError, match="reads this one as redisbeat_lease_seconds"):
        Config.from_app(plain)
    with pytest.raises(ConfigurationError, match="did you mean REDISBEAT_BATCH_SIZE"):
        Config.from_app(app_with(broker_url="redis://", REDISBEAT_BATCH_SIZ=7))


def test_a_worker_says_a_misspelt_setting_turns_on_nothing_and_is_quiet_without_any(caplog):
    from celery import signals

    import redisbeat.worker  # noqa: F401  (connects its worker_init receiver)

    with caplog.at_level(logging.WARNING, logger="redisbeat"):
        signals.worker_init.send(sender=_Worker(app_with(broker_url="redis://")))
        assert ours(caplog) == []
        typo = app_with(broker_url="redis://", redisbeat_track_run=True)
        signals.worker_init.send(sender=_Worker(typo))
    [line] = ours(caplog)
    assert "unknown setting redisbeat_track_run; did you mean redisbeat_track_runs?" in line
    assert "this worker does not track runs nor drop copies" in line


def ours(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What redisbeat logged (the other receivers of the signal, Django's, say their own)."""
    return [r.getMessage() for r in caplog.records if r.name.startswith("redisbeat")]


class _Worker:
    """What a worker_init receiver reads of its sender (Celery's WorkController): its app."""

    def __init__(self, app: Celery) -> None:
        self.app = app
