"""What every beat derives alike for an occurrence: its task id, and its jitter."""

from __future__ import annotations

import hashlib
import uuid

#: Namespace of occurrence ids (UUID5), fixed forever so ids stay stable across releases.
OCCURRENCE_NAMESPACE = uuid.UUID("6f1c2b5e-8d3a-4e0f-9b7a-2c4d6e8f0a1b")
_NAMESPACE_BYTES = OCCURRENCE_NAMESPACE.bytes


def occurrence_id(prefix: str, name: str, due_ms: int) -> str:
    """The task id of the occurrence of entry ``name`` due at ``due_ms``.

    Every beat derives the same id for the same occurrence, so a re-send after a crash
    carries the id of the first send and can be dropped downstream. It is
    ``str(uuid.uuid5(OCCURRENCE_NAMESPACE, f"{prefix}\\x00{name}\\x00{due_ms}"))``, worked out
    without the UUID object (a beat makes one per send).
    """
    digest = bytearray(
        hashlib.sha1(_NAMESPACE_BYTES + f"{prefix}\x00{name}\x00{due_ms}".encode()).digest()[:16]
    )
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def jitter_ms(name: str, due_ms: int, jitter: float, room_ms: int | None) -> int:
    """How long after its due time the occurrence of ``name`` due at ``due_ms`` is sent,
    for an entry with ``jitter`` seconds: stable (every beat, and a beat that takes over,
    works out the same delay), spread evenly over ``0 .. jitter``, and less than
    ``room_ms``, the time to the next occurrence (None: none)."""
    most = int(jitter * 1000)
    if room_ms is not None:
        most = min(most, room_ms - 1)
    if most <= 0:
        return 0
    digest = hashlib.sha1(f"jitter\x00{name}\x00{due_ms}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (most + 1)
