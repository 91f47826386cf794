"""The failover scenario: kill -9 the beat doing the work, and time how long the entries
wait before another beat sends them."""

from __future__ import annotations

import signal
import time
from typing import Any

from ..adapters import Adapter, now_ms
from ..harness import BeatProcess, Rig, specs_for, wait_for
from ..judging import due_of, judge
from .measure import fresh, sleep_until
from .profiles import DCB, LEASE_S, REDISBEAT, START_S, Profile, Table

#: django-celery-beat runs one beat: killed, nothing is sent until it is restarted.
DCB_ROW = {
    "scheduler": DCB,
    "beats": 1,
    "sends resume after s": "when restarted",
    "late max after kill s": "",
    "missed": "",
}


def failover(rig: Rig, profile: Profile, schedulers: list[str]) -> Table:
    """kill -9 the beat doing the work: how long until the entries are sent again."""
    table = Table(
        "failover",
        "Failover: kill -9 of a working beat, 200 fires/s",
        ["scheduler", "beats", "sends resume after s", "late max after kill s", "missed"],
    )
    for name in schedulers:
        if name == DCB:
            table.rows.append(dict(DCB_ROW))
            continue
        adapter = fresh(rig, name)
        table.rows.append(_failover_of(rig, adapter, name))
        adapter.clear()
    table.notes.append(
        "Two beats each (django-celery-beat allows one, so a killed beat stops everything "
        "until something restarts it). 'Sends resume after' runs from the kill to the first "
        "message of an occurrence due after it. redisbeat's other beat never stopped; the "
        "killed beat's claims wait for their lease (5 s by default). celery-redbeat's "
        "standby waits for the lock to expire (its default timeout: 5 x the loop interval)."
    )
    return table


def _failover_of(rig: Rig, adapter: Adapter, name: str) -> dict[str, Any]:
    """Two beats at 200 fires/s, the working one killed: one scheduler's row."""
    start = now_ms() + int(START_S * 1000)
    specs = specs_for(200, 1, start)
    adapter.load(specs)
    procs = rig.start_beats(adapter, 2)
    sleep_until(start + 4000)
    assert rig.sink is not None
    sink = rig.sink
    victim = _working_beat(procs)
    killed = now_ms()
    victim.kill(signal.SIGKILL)
    by_name = {s.name: s for s in specs}

    def resumed(s: Any = sink, k: int = killed, by: Any = by_name) -> int | None:
        """ms from the kill to the first message of an occurrence due after it."""
        after = [a.arrived_ms for a in s.arrivals() if due_of(by[a.entry], a) > k]
        return min(after) - k if after else None

    wait_for(resumed, 120, f"{name} to resume")
    resumed_ms = resumed() or 0
    # What the killed beat held comes back when its lease (or lock) runs out.
    w1 = now_ms() + 2000
    sleep_until(w1 + (LEASE_S * 1000 if name == REDISBEAT else 2000) + 3000)
    rig.stop_beats()
    fires = judge(specs, sink.arrivals(), (killed, w1))
    return {
        "scheduler": name,
        "beats": 2,
        "sends resume after s": round(resumed_ms / 1000, 2),
        "late max after kill s": round(max(fires.lateness_ms, default=0) / 1000, 2),
        "missed": fires.missed,
    }


def _working_beat(procs: list[BeatProcess]) -> BeatProcess:
    """The beat using the most CPU over half a second: the one holding a lock, if any."""
    before = [p.cpu_seconds() for p in procs]
    time.sleep(0.5)
    spent = [p.cpu_seconds() - b for p, b in zip(procs, before, strict=True)]
    return procs[spent.index(max(spent))]
