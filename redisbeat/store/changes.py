"""Wake-ups: the pub/sub channel on which the scripts announce changes, as a beat hears it.

Every change that can make an entry due sooner (written, run now, repaired, a claim handed
back) is published by the Lua script that makes it, in the same atomic step.
"""

from __future__ import annotations

import time

import redis

from .base import StoreBase
from .errors import translated


class ChangeFeed(StoreBase):
    """One subscription per store to the deployment's events channel."""

    @property
    def channel(self) -> str:
        """The pub/sub channel the beats listen on (an ACL must grant it)."""
        return self.keys.events

    @translated
    def subscribe(self) -> None:
        """Start listening for changes (before the first claim, so none is missed)."""
        if self._pubsub is None:
            # Subscribe confirmations are kept: a read that returns None then means that
            # nothing is waiting, which draining relies on.
            pubsub = self.client.pubsub(ignore_subscribe_messages=False)  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(self.keys.events)
            except redis.RedisError:
                pubsub.close()
                raise
            self._pubsub = pubsub

    @translated
    def changes_pending(self) -> bool:
        """Subscribe if not subscribed, and take every change published since the last look,
        without waiting. True when one was, or may have been missed: the subscription is
        new (a lost connection drops it), so a change published before it was not heard."""
        try:
            return self._look()
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            # The listening connection alone may have been lost: one fresh try.
            self._drop_subscription()
        try:
            return self._look()
        except (redis.RedisError, OSError):
            self._drop_subscription()
            raise

    @translated
    def changed_names(self) -> set[str]:
        """What was published since the last look, without waiting: the names of the entries
        changed (and words such as ``released`` for other wake-ups). What is taken here is
        still a change the next :meth:`changes_pending` or :meth:`wait_for_change` reports.
        Nothing is known without a subscription (a lost connection drops it, and the next
        look then says a change may have been missed)."""
        if self._pubsub is None:
            return set()
        names: set[str] = set()
        try:
            while (message := self._pubsub.get_message(timeout=0)) is not None:
                if message.get("type") == "message":
                    names.add(str(message["data"]))
        except (redis.RedisError, OSError):
            self._drop_subscription()
            return names
        self._taken = self._taken or bool(names)
        return names

    @translated
    def wait_for_change(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a change; True when one arrived."""
        self.subscribe()
        if self._taken:
            self._taken = False
            return self._heard(True)
        deadline = time.monotonic() + timeout
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                message = self._pubsub.get_message(timeout=remaining)
                if message is not None and message.get("type") == "message":
                    # A burst of changes needs one claim, not one per message.
                    self._drain()
                    return self._heard(True)
        except (redis.RedisError, OSError):
            self._drop_subscription()
            raise
        return False

    def _look(self) -> bool:
        fresh, taken = self._pubsub is None, self._taken
        self._taken = False
        self.subscribe()
        return self._heard(self._drain() or fresh or taken)

    def may_have_changed(self) -> None:
        """For a beat that cannot listen: any shard may hold something due now (a delayed
        task written meanwhile, say), so the next claim looks at every one."""
        self._heard(True)

    def _heard(self, changed: bool) -> bool:
        if changed:
            self.cursor.changed()  # any shard may hold something due now
            self.delayed_cursor.changed()
        return changed

    def _drain(self) -> bool:
        """Read what the subscription holds without blocking; True if a change was in it."""
        changed = False
        while (message := self._pubsub.get_message(timeout=0)) is not None:
            changed = changed or message.get("type") == "message"
        return changed
