"""Reads and writes the tests make while a background retry of the app writes.

The tests' SQLite is in memory with a shared cache, where a statement that meets another
thread's write lock fails at once ("database table is locked") instead of waiting as a
file database does: polled, such a statement is "not yet", and is made again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError

from redisbeat_testkit.ports import wait_until

T = TypeVar("T")


def polled(statement: Callable[[], T]) -> Callable[[], T | None]:
    """``statement`` as a poll's predicate: one the database refused is None ("not yet")."""

    def attempt() -> T | None:
        try:
            return statement()
        except DatabaseError:
            return None

    return attempt


def once_unlocked(statement: Callable[[], T], what: str) -> T:
    """What ``statement`` returns once the database lets it through (a truthy value)."""
    result: T = wait_until(polled(statement), 20, what)
    return result
