"""The stored format: which shape of redisbeat's data in Redis a deployment holds.

Redis keeps a deployment's data across releases, so the deployment records the version of
its format, an integer, in the ``format`` field of its layout record (:attr:`.Keys.layout`,
shard 0's hash tag). A process reads that field in the same script, and the same round trip,
as the layout: when it first touches the deployment (``layout.lua``), and a beat at every
heartbeat (``heartbeat.lua``). Both record :data:`FORMAT` where no format is recorded yet,
and refuse, before they write anything, a format this release does not read: the store
raises :class:`~.errors.StoreIncompatible`, a beat stops, and nothing in Redis has changed.

Format 1 is everything redisbeat has written up to the release that began recording it:
that release reads all of it (each change before it was made so that the data already
stored still reads), so a deployment with data but no recorded format is format 1 as it
stands, and recording the number is its whole migration. A release that changes the format
raises :data:`FORMAT`; it must keep reading the format before it, which processes of the
previous release still write until they stop (see ``docs/operations.md#upgrades``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .errors import StoreIncompatible, translated
from .records import text_or_none

if TYPE_CHECKING:
    from .base import StoreBase

#: The format this release writes, and the newest it reads.
FORMAT = 1
#: The layout record's field that holds the deployment's format.
FIELD = "format"
#: The first value of a script's reply that refuses the recorded format (``prelude.lua``'s
#: ``format_refused``); the second is the format recorded.
REFUSED = "format"
#: Where an operator reads what to do.
DOCS = "docs/operations.md#upgrades"

_NUMBER = re.compile(r"[0-9]+")


def incompatible(recorded: str, where: str, prefix: str) -> StoreIncompatible:
    """The error for a store that records a format this release does not read, in one line."""
    from .. import __version__  # the package imports the store first

    held = recorded if _NUMBER.fullmatch(recorded) else repr(recorded)
    return StoreIncompatible(
        f"the store at {where} (prefix {prefix!r}) holds format {held}; this redisbeat "
        f"{__version__} understands up to format {FORMAT}: upgrade redisbeat on this host, "
        f"see {DOCS}"
    )


def refusal(reply: Any) -> str | None:
    """The format a script's reply refuses (None: the reply is the script's usual one)."""
    if isinstance(reply, list) and len(reply) == 2 and reply[0] == REFUSED:
        return str(reply[1])
    return None


@translated
def stored_format(store: StoreBase) -> int | None:
    """The format ``store``'s deployment records (None: none yet, or not a number)."""
    recorded = text_or_none(store.client.hget(store.keys.layout, FIELD))
    return int(recorded) if recorded is not None and _NUMBER.fullmatch(recorded) else None


@translated
def check_format(store: StoreBase) -> None:
    """Read the layout again now, which checks the recorded format (and records this
    release's where none is): raises :class:`~.errors.StoreIncompatible` when this release
    does not read it. Every process checks at its first call that needs the layout anyway;
    this is for one that wants to know before it does anything (the command line)."""
    store.forget_layout()
    store.follow(store.scripts.layout("read", store.configured_shards))
