"""A TCP proxy between one beat and Redis that can cut, stall or slow the link on demand."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .ports import free_port


@dataclass
class LinkState:
    """What the proxy does to the traffic right now."""

    #: Refuse new connections and cut the open ones.
    dropped: bool = False
    #: Hold Redis's replies (requests still reach Redis): the beat waits, then gets old news.
    replies_stalled: bool = False
    #: Start holding the replies at the first request for which this is true.
    stall_from: Callable[[bytes], bool] | None = None
    #: Extra delay, seconds, for every chunk in either direction.
    latency: float = 0.0
    #: Nothing passes either way (what was sent is lost) and nothing is refused: a link a
    #: firewall or NAT dropped silently, which only a timeout notices.
    blackholed: bool = False


class TcpProxy:
    """Forward 127.0.0.1:<port> to a Redis server; the faults are switched from any thread."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.state = LinkState()
        #: Chunks written towards Redis: requests, a pipeline counting once (round trips).
        self.requests = 0
        #: Requests holding each pattern given to :meth:`tally` (a script's SHA, say).
        self.tallies: dict[bytes, int] = {}
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._resumed = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._run, name="chaos-proxy", daemon=True)
        self._ready = threading.Event()
        self._server: asyncio.AbstractServer | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    # -- control (any thread) -----------------------------------------------------------------

    def start(self) -> TcpProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the chaos proxy did not start")
        return self

    def tally(self, pattern: bytes) -> None:
        """Count, from now on, the requests written towards Redis that hold ``pattern``."""
        self.tallies.setdefault(pattern, 0)

    def drop(self) -> None:
        self._call(self._drop)

    def stall_replies(self, from_request: Callable[[bytes], bool] | None = None) -> None:
        """Hold every reply from now on, or from the first request ``from_request`` matches."""
        if from_request is None:
            self._call(self._set, LinkState(replies_stalled=True))
        else:
            self._call(self._set, LinkState(stall_from=from_request))

    def blackhole(self) -> None:
        self._call(self._set, LinkState(blackholed=True))

    def slow(self, latency: float) -> None:
        self._call(self._set, LinkState(latency=latency))

    def heal(self) -> None:
        self._call(self._set, LinkState())

    def stop(self) -> None:
        if self._thread.is_alive():
            self._call(self._drop)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def _call(self, fn: object, *args: object) -> None:
        done = threading.Event()

        def run() -> None:
            fn(*args)  # type: ignore[operator]
            done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(10)

    # -- the loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._resumed.set()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.port)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            self._loop.run_until_complete(self._server.wait_closed())
            self._loop.close()

    def _set(self, state: LinkState) -> None:
        self.state = state
        if state.replies_stalled:
            self._resumed.clear()
        else:
            self._resumed.set()

    def _drop(self) -> None:
        self._set(LinkState(dropped=True))
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self.state.dropped:
            client_w.transport.abort()
            return
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.transport.abort()
            return
        self._writers |= {client_w, server_w}
        await asyncio.gather(
            self._pump(client_r, server_w, replies=False),
            self._pump(server_r, client_w, replies=True),
            return_exceptions=True,
        )
        for writer in (client_w, server_w):
            self._writers.discard(writer)
            writer.transport.abort()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, replies: bool
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                if not replies:
                    self.requests += 1
                    for pattern in self.tallies:
                        if pattern in data:
                            self.tallies[pattern] += 1
                stall_from = self.state.stall_from
                if not replies and stall_from is not None and stall_from(data):
                    self._set(LinkState(replies_stalled=True))
                if replies:
                    await self._resumed.wait()
                if self.state.latency:
                    await asyncio.sleep(self.state.latency)
                if self.state.dropped:
                    break
                if self.state.blackholed:
                    continue
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
