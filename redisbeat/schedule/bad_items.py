"""BadItem: a ``beat_schedule`` item that makes no entry, as a beat reports it.

A beat does not stop on one: it sends the other entries, logs the item and sets it aside
as a corrupt stored definition is (:meth:`ScheduleStore.quarantine_item`). The item takes
part in the configuration's version through :attr:`BadItem.digest`, which two beats with
the same broken item agree on even when the item holds what JSON cannot (a
``datetime.now()`` in its args differs from one process to the next).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from celery.schedules import BaseSchedule

from ..errors import InvalidEntry
from .kinds import Cron, Crontab, Interval, Solar

#: How deep an item is shown; what lies deeper (or loops back) is shown by its type.
MAX_DEPTH = 20
#: Values whose repr is the same in every process (unless it is object's, which names an
#: address), so that they count in the digest by what they say.
STABLE_REPR = (timedelta, BaseSchedule, Interval, Crontab, Cron, Solar)


@dataclass(frozen=True)
class BadItem:
    """One item of ``beat_schedule`` that is not a valid entry, and why."""

    name: str
    error: InvalidEntry
    #: The item as far as it can be shown: JSON, anything JSON cannot hold as its repr.
    shown: str
    #: The item's digest in the configuration's version; never an entry's (it starts '!').
    digest: str

    @classmethod
    def of(cls, name: Any, item: Any, error: InvalidEntry, source: str) -> BadItem:
        """``source``: shown with the item, as a stored definition shows who owns it."""
        stable = _dumps(_plain(item, _stable, 0))
        digest = "!" + hashlib.sha256(stable.encode()).hexdigest()[:15]
        shown = _plain(item, repr, 0)
        if isinstance(shown, dict):
            shown.setdefault("source", source)
        return cls(str(name), error, _dumps(shown), digest)

    def describe(self, fate: str) -> str:
        """What is wrong, what to do, and ``fate``: what runs meanwhile."""
        return f"beat_schedule {self.error}; fix it in beat_schedule and deploy; until then {fate}"


def _plain(value: Any, leaf: Callable[[Any], str], depth: int) -> Any:
    """``value`` as JSON holds it: mappings (keys as text), lists, text, finite numbers,
    booleans and None; anything else as ``leaf(value)``."""
    if depth > MAX_DEPTH:
        return f"<{type(value).__name__}>"
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, leaf, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, leaf, depth + 1) for v in value]
    return leaf(value)


def _stable(value: Any) -> str:
    # Anything else counts by its type: a datetime says the moment it was made.
    if isinstance(value, STABLE_REPR) and type(value).__repr__ is not object.__repr__:
        return repr(value)
    return f"<{type(value).__name__}>"


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
