"""The Lua scripts, loaded once per client from ``lua/*.lua`` and called by EVALSHA."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

import redis
from redis.commands.core import Script

NAMES = ("claim", "finish", "upsert", "remove", "quarantine", "run_now", "heartbeat")


@cache
def source(name: str) -> str:
    return (files(__package__) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


class Scripts:
    """One registered :class:`~redis.commands.core.Script` per Lua file."""

    def __init__(self, client: redis.Redis) -> None:
        for name in NAMES:
            setattr(self, name, client.register_script(source(name)))

    claim: Script
    finish: Script
    upsert: Script
    remove: Script
    quarantine: Script
    run_now: Script
    heartbeat: Script
