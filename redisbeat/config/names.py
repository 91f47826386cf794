"""Misspelled settings: every spelling Celery or Django might be given, checked by name."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError

#: redisbeat_django's own Django settings, which Celery sees too when it is configured from
#: ``django.conf:settings``: not Celery settings, and not misspelled.
DJANGO_SETTINGS = frozenset({"REDISBEAT_CELERY_APP"})


def reject_unknown_settings(conf: Any, defaults: Mapping[str, Any]) -> None:
    """Stop on a misspelled setting, however it is spelled: ``redisbeat_*``, the upper-case
    ``REDISBEAT_*`` Celery does not read, or ``CELERY_REDISBEAT_*`` (Django's namespace)."""
    known = {f"redisbeat_{name}" for name in defaults}
    keys = list(conf.keys())  # first: the namespace is known once the settings are read
    # With config_from_object(..., namespace="CELERY") Celery reads CELERY_REDISBEAT_*.
    prefix = str(getattr(conf, "prefix", None) or "")
    for key in keys:
        if not isinstance(key, str):
            continue
        if key.startswith("redisbeat_"):
            if key not in known:
                raise ConfigurationError(f"unknown setting {key}{_hint(key, known)}")
        elif prefix and key.startswith(f"{prefix}REDISBEAT_"):
            name = key[len(prefix) :].lower()
            if name not in known:
                spelled = {f"{prefix}{k.upper()}" for k in known}
                raise ConfigurationError(f"unknown setting {key}{_hint(key, spelled)}")
        elif key.startswith("REDISBEAT_") and key not in DJANGO_SETTINGS:
            name = key.lower()
            how = f"{prefix}{key}" if prefix else name
            if name in known:
                raise ConfigurationError(
                    f"setting {key} is not read: Celery reads this one as {how}"
                )
            upper = {k.upper() for k in known} | DJANGO_SETTINGS
            raise ConfigurationError(f"unknown setting {key}{_hint(key, upper)}")


def _hint(key: str, known: set[str] | frozenset[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f"; did you mean {close[0]}?" if close else ""
