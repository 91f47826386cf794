"""How long a run's own processes waited for a CPU: the lateness a busy host adds to a send.

The 1-minute load average misses a burst of other work that lasts a second or two (another
test starting a Django site beside the scenario); the kernel's per-thread run-queue wait
(``/proc/<pid>/task/<tid>/schedstat``, the nanoseconds a runnable thread waited for a core)
does not: a send held up because a beat, a redis-server or the reader was not given a core
shows there as exactly that wait.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

PROC = Path("/proc")


def family(root: int) -> set[int]:
    """``root`` and every process below it (the beats and redis-servers a run started)."""
    children: dict[int, list[int]] = {}
    for stat in PROC.glob("[0-9]*/stat"):
        try:
            # The command name is in parentheses and may hold spaces: the ppid follows it.
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += [child for child in children.get(pid, []) if child not in found]
    return found


def waits_ns(pids: set[int]) -> dict[tuple[int, int], int]:
    """Each live thread of these processes -> the nanoseconds it has waited for a core."""
    waits = {}
    for pid in pids:
        for schedstat in PROC.glob(f"{pid}/task/[0-9]*/schedstat"):
            try:
                waits[(pid, int(schedstat.parent.name))] = int(schedstat.read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue  # the thread ended meanwhile
    return waits


class RunQueueWait:
    """Samples the run-queue wait of this process and its descendants while a run goes on;
    ``worst_ms`` is the most they waited in all within any ``window`` seconds, the most a
    send due in that window can have been held up by a host that did not give them a core.
    A thread that ends between two samples loses its last wait; one that starts counts from
    zero."""

    def __init__(self, window: float = 2.0, every: float = 0.2) -> None:
        self.root = os.getpid()
        self.window, self.every = window, every
        self.intervals: list[int] = []  # the wait (ns) between consecutive samples
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="run-queue-wait", daemon=True)

    def start(self) -> RunQueueWait:
        self._thread.start()
        return self

    def _sample(self) -> None:
        before = waits_ns(family(self.root))
        while not self._stop.wait(self.every):
            now = waits_ns(family(self.root))
            self.intervals.append(
                sum(max(0, ns - before.get(thread, 0)) for thread, ns in now.items())
            )
            before = now

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def worst_ms(self) -> int:
        """Stop sampling; the most waited within any window of the run (ms)."""
        self.stop()
        width = max(1, round(self.window / self.every))
        sums = [sum(self.intervals[i : i + width]) for i in range(len(self.intervals))]
        return max(sums, default=0) // 1_000_000
