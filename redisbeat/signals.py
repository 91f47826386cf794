"""Signals a beat sends, Celery style: connect a receiver to log, alert or report to Sentry.

    from redisbeat import signals

    @signals.entry_quarantined.connect
    def page_someone(sender, name, error, **kwargs):
        alerts.send(f"redisbeat set {name} aside: {error}")

``sender`` is the id of the beat that sends the signal. Receivers run in the beat's loop:
one that raises is logged and does not stop the beat (``send_robust``), and one that blocks
delays every send of that beat, so hand slow work to a thread or a queue. A signal nobody
listens to costs nothing; ``beat_joined`` and ``beat_left`` read the beats alive once per
heartbeat only while someone listens.
"""

from __future__ import annotations

import weakref

from celery.utils.dispatch import Signal

__all__ = [
    "beat_joined",
    "beat_left",
    "entry_quarantined",
    "entry_recovered",
    "entry_sent",
    "occurrence_missed",
]

#: An occurrence was sent. Arguments: ``name`` (the entry, or ``delayed:<key>`` for a
#: delayed task), ``task`` (its task name), ``task_id``, ``due`` (aware datetime), ``late``
#: (seconds after its due time), ``recovered`` (True: re-sent after a stopped beat's lease
#: ran out).
entry_sent = Signal(name="entry_sent")

#: An occurrence a stopped beat had claimed is sent again by this beat. Arguments: ``name``,
#: ``task``, ``task_id``, ``due``. Also sent as ``entry_sent`` with ``recovered=True``.
entry_recovered = Signal(name="entry_recovered")

#: Occurrences of an entry were not sent within their grace: every beat was stopped, or
#: Redis could not be reached, until past their time (``reason``: ``"late"``), or a pause
#: held them back (``"paused"``, known at the first send after it). Arguments: ``name``,
#: ``task``, ``count`` (how many), ``reason``, ``before`` (aware datetime: the due time of
#: the occurrence sent or skipped after them; the missed ones fell due before).
occurrence_missed = Signal(name="occurrence_missed")

#: An entry was set aside: its definition does not load, its sends failed
#: ``redisbeat_quarantine_after`` times in a row, or its ``beat_schedule`` item is not a valid
#: entry (sent by the beat that applies the configuration). Arguments: ``name``, ``error``.
entry_quarantined = Signal(name="entry_quarantined")

#: A beat appeared in the deployment (this one at its first heartbeat, others as this one
#: sees them). Arguments: ``beat`` (a :class:`~redisbeat.BeatInfo`).
beat_joined = Signal(name="beat_joined")

#: A beat left: it stopped and deregistered, or its heartbeat went silent for
#: three ``redisbeat_heartbeat_seconds``. Arguments: ``beat_id``.
beat_left = Signal(name="beat_left")


def listened(*signals: Signal) -> bool:
    """Whether any of ``signals`` has a live receiver. A weakly connected receiver that was
    garbage-collected stays in ``Signal.receivers`` until the signal is next sent, and must
    not keep a beat reading what nobody wants."""
    return any(
        not isinstance(ref, weakref.ReferenceType) or ref() is not None
        for signal in signals
        for _, ref in signal.receivers
    )
