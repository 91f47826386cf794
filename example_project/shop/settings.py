"""Settings of the shop example project.

Configured from the environment:

- ``REDIS_URL``: the broker, which also holds the beat schedule (default
  ``redis://127.0.0.1:6379/0``);
- ``DATABASE_URL``: ``postgres://user:password@host:5432/name`` to use PostgreSQL (needs
  psycopg); otherwise SQLite in ``SQLITE_PATH`` (default ``.demo/db.sqlite3``);
- ``DJANGO_DEBUG`` (default ``1``), ``DJANGO_SECRET_KEY``, ``TIME_ZONE`` (default UTC).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from celery.schedules import crontab

BASE_DIR = Path(__file__).resolve().parent.parent


def database_from_url(url: str) -> dict[str, Any]:
    """A ``DATABASES`` entry from ``postgres://user:password@host:port/name``."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        raise ValueError(f"DATABASE_URL must be a postgres:// URL, got scheme {parts.scheme!r}")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
    }


def sqlite_database(path: Path) -> dict[str, Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)}


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "redisbeat-example-not-a-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "redisbeat_django",
    "orders",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
ROOT_URLCONF = "shop.urls"
WSGI_APPLICATION = "shop.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": (
        database_from_url(os.environ["DATABASE_URL"])
        if os.environ.get("DATABASE_URL")
        else sqlite_database(Path(os.environ.get("SQLITE_PATH", BASE_DIR / ".demo" / "db.sqlite3")))
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"

# -- Celery (read by shop/celery.py with namespace="CELERY") ----------------------------------

CELERY_BROKER_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "redisbeat.RedisScheduler"
# The workers record what became of each run; each entry keeps its last 20 (admin, CLI).
CELERY_REDISBEAT_TRACK_RUNS = True
CELERY_REDISBEAT_HISTORY_SIZE = 20
# The schedule lives in the broker's Redis; any number of `celery -A shop beat` may run.
CELERY_BEAT_SCHEDULE = {
    "digest-every-2s": {"task": "orders.send_digest", "schedule": 2.0},
    "expire-carts-every-3s": {"task": "orders.expire_carts", "schedule": timedelta(seconds=3)},
    "inventory-every-minute": {
        "task": "orders.sync_inventory",
        "schedule": crontab(minute="*"),
        "kwargs": {"warehouse": "main"},
    },
}
