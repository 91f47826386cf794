"""The broker's Redis driver, checked before a beat's loop starts, and the timeouts of the
beat's own connection to a Redis broker.

kombu waits for a Redis broker's reply forever by default. A connection that stopped
answering (a firewall or NAT that dropped it silently, a broker frozen in a failover) would
hold the batch a beat is sending forever: its lease is renewed while the send waits, so no
other beat may take it over. The beat's connection waits as long as its store's does
(:func:`broker_timeouts`); a send that times out is a broker failure, handed back.

kombu 5.7's Redis transport refuses a redis-py older than 6.1 at each connection it makes
(``VersionMismatch``): a beat would fail every send, forever, and deliver nothing. Run at
start-up, kombu's own check
(:func:`~redisbeat.sending.celery_internals.check_redis_transport`) turns that into one
line that names both versions and the fix, and the beat stops.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, requires, version
from typing import Any

from kombu.exceptions import VersionMismatch

from ..config import Config
from ..errors import Incompatible
from ..sending.celery_internals import check_redis_transport, redis_transport

#: How kombu words the redis-py it needs ("... requires redis-py versions 6.1.0 or later").
_NEEDED = re.compile(r"(\d+(?:\.\d+)+) or later")
#: The redis-py timeouts a beat's broker connection shares with its store's.
TIMEOUTS = ("socket_timeout", "socket_connect_timeout")


def check_broker_driver(app: Any) -> None:
    """Raise :class:`~redisbeat.errors.Incompatible` when the app's broker is kombu's Redis
    transport and kombu refuses the installed redis-py."""
    try:
        check_redis_transport(app)
    except VersionMismatch as exc:
        raise Incompatible(mismatch_text(str(exc))) from None


def broker_timeouts(app: Any, config: Config) -> dict[str, Any]:
    """Transport options for the beat's connection to a Redis broker: the store's socket
    timeouts, where the app's ``broker_transport_options`` set none (theirs stand)."""
    if redis_transport(app) is None:
        return {}
    given = app.conf.broker_transport_options or {}
    timeouts = {key: config.redis_options.get(key) for key in TIMEOUTS}
    return {key: value for key, value in timeouts.items() if key not in given}


def mismatch_text(refusal: str) -> str:
    """kombu's refusal of redis-py (``VersionMismatch``'s text) as one line with the fix."""
    kombu = _version("kombu")
    have = _version("redis")
    found = _NEEDED.search(refusal)
    needs = f"needs redis-py {found[1]} or later" if found else f"refuses redis-py ({refusal})"
    declared = _kombu_redis_requirement()
    if declared is not None:
        fix = f"pip install '{declared}' (what kombu[redis] {kombu} requires)"
    else:
        fix = (
            f"pip install 'redis>={found[1]}'" if found else f"pip install 'kombu[redis]=={kombu}'"
        )
    return (
        f"kombu {kombu}'s Redis transport {needs} and this environment has redis-py {have}: {fix}"
    )


def _kombu_redis_requirement() -> str | None:
    """The redis-py that kombu's ``redis`` extra asks for, e.g. ``redis>=6.4.0,<9.0.0``."""
    try:
        declared = requires("kombu") or []
    except PackageNotFoundError:
        return None
    for line in declared:
        spec, _, marker = line.partition(";")
        if "redis" in marker and re.match(r"redis\s*[<>=!~]", spec.strip()):
            bounds = sorted(spec.strip()[len("redis") :].split(","), key=lambda b: b[0] != ">")
            return "redis" + ",".join(b.strip() for b in bounds)
    return None


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"
