"""Add an entry to the schedule at runtime and read its state back from Redis."""

import os
from datetime import timedelta

from celery import Celery

from redisbeat import Entry, ScheduleStore

app = Celery("proj", broker=os.environ.get("REDIS_URL", "redis://localhost:6379/0"))

store = ScheduleStore.from_app(app)  # the same settings the beats use
store.upsert(Entry(name="report", task="proj.report", schedule=timedelta(minutes=5)))
state = store.state("report")
print(f"next run of {state.name}: {state.next_run_at:%Y-%m-%d %H:%M:%S} UTC")
print(f"runs so far: {state.total_run_count}")
store.close()
