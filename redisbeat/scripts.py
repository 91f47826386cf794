"""The Lua scripts, loaded once per client from ``lua/*.lua`` and called by EVALSHA."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from importlib.resources import files
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError

NAMES = (
    "claim",
    "finish",
    "renew",
    "expire_lost",
    "upsert",
    "remove",
    "quarantine",
    "run_now",
    "heartbeat",
    "config",
    "repair",
)
#: Tries of redis-py's Script call (each loads the script again once on NOSCRIPT) per call.
MAX_RELOADS = 3


@cache
def _read(name: str) -> str:
    return (files(__package__) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def source(name: str) -> str:
    """A script's Lua, after the shared prelude (its key type check, ``wrong_type``)."""
    return _read("prelude") + _read(name)


class ReloadingScript(Script):
    """redis-py's Script, loading itself again on NOSCRIPT as often as it takes (a few times).

    redis-py's own reload happens once per call, so a ``SCRIPT FLUSH`` between that load and
    the EVALSHA after it would still fail the call. NOSCRIPT means the script did not run, so
    calling again is safe. In a pipeline the scripts are loaded when it is executed instead.
    """

    def __call__(
        self,
        keys: Sequence[Any] | None = None,
        args: Iterable[Any] | None = None,
        client: Any = None,
    ) -> Any:
        for _ in range(MAX_RELOADS - 1):
            try:
                return super().__call__(keys, args, client)
            except NoScriptError:
                continue
        return super().__call__(keys, args, client)


class Scripts:
    """One registered :class:`ReloadingScript` per Lua file."""

    def __init__(self, client: redis.Redis) -> None:
        for name in NAMES:
            setattr(self, name, ReloadingScript(client, source(name)))

    claim: Script
    finish: Script
    renew: Script
    expire_lost: Script
    upsert: Script
    remove: Script
    quarantine: Script
    run_now: Script
    heartbeat: Script
    config: Script
    repair: Script
