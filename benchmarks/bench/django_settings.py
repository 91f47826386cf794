"""Django settings for django-celery-beat's beats and the adapters' ORM process.

The database is the adapter's private PostgreSQL server, found through ``BENCH_PG_HOST`` and
``BENCH_PG_PORT``. redisbeat_django is installed too, for redisbeat's admin path; its store
is the one :mod:`benchmarks.bench.app` configures.
"""

from __future__ import annotations

import os

SECRET_KEY = "redisbeat-bench"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django_celery_beat", "redisbeat_django"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("BENCH_PG_PORT", "5432"),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
REDISBEAT_CELERY_APP = "benchmarks.bench.app:app"
