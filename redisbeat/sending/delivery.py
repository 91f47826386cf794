"""What the broker did with a batch: the messages it took, and those it refused or failed
(handed back, to be sent again by any beat).

A failure is said with its cause, with a traceback at the first failure in a row; the
retries of a long episode (a broker out of memory, a read-only replica) only at DEBUG.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from .wire import Published

log = logging.getLogger(__name__)


class Delivery:
    """A publisher's sends, settled message by message."""

    def __init__(self) -> None:
        #: Whether the last send failed on the broker.
        self.failing = False

    def settle(
        self,
        published: list[Published],
        errors: Sequence[BaseException | None] | None,
        failed: dict[str, str | None],
    ) -> list[Published]:
        """The messages the broker took; the others (an error each, or the one error of the
        whole send) are added to ``failed`` as handed back."""
        if not errors or not any(errors):
            if published:
                self.failing = False  # the broker takes messages again
            return published
        first = next(error for error in errors if error is not None)
        if len(errors) != len(published):  # one error for the whole send: none went
            errors = [first] * len(published)
        went: list[Published] = []
        for p, error in zip(published, errors, strict=True):
            if error is None:
                went.append(p)
            else:
                failed[p.task_id] = None
        count = len(published)
        what = (
            f"the broker refused {count - len(went)} of {count} message(s)"
            if went
            else f"could not send a batch of {count} message(s)"
        )
        self.failure(what, first, "them")
        return went

    def failure(self, what: str, exc: BaseException, them: str) -> None:
        level = logging.DEBUG if self.failing else logging.ERROR
        self.failing = True
        reason = f"{type(exc).__name__}: {exc}"
        log.log(level, "redisbeat: %s (%s); handing %s back", what, reason, them, exc_info=exc)


def probe(producer: Any) -> None:
    """Return once the broker answers, raise its error while it does not: a Redis broker is
    sent a PING (on the connection the sends use), any other is connected."""
    ping = getattr(getattr(producer.channel, "client", None), "ping", None)
    if callable(ping):
        ping()
    else:
        producer.connection.ensure_connection(max_retries=1)
