"""Building and publishing Celery task messages: one interface, :class:`Publisher`.

``Publisher.send`` buffers an occurrence's message and ``Publisher.flush`` sends the batch.
Messages are built without ``apply_async``'s repeated work where Celery's steps are modelled
(:mod:`.template`, :mod:`.wire`, :mod:`.routing`; written straight onto a Redis broker's
lists by :mod:`.lists`; ``before_task_publish`` receivers change copies, :mod:`.receivers`),
and by ``apply_async`` otherwise; what the broker took of a batch, and what it refused, is
settled by :mod:`.delivery`. Imports run one way: publisher -> delivery -> template -> lists
and wire -> routing and receivers -> celery_internals, the one module that reads names of
Celery and kombu outside their public API.
"""

from __future__ import annotations

from .publisher import Publisher, message_options

__all__ = ["Publisher", "message_options"]
