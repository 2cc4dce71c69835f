"""A simulated Amazon Q upstream on its own event loop in a daemon thread, for code that is not async
(`q2api demo`, benchmarks, the soak): ``handle = SimulatedUpstream.run_in_thread(); handle.url; handle.stop()``.

The simulator's state belongs to its loop, so what a caller changes goes through that loop
(`enqueue`, `revoke_access_token`, `run`), never straight into the object from another thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from q2api.testing.scripts import Reply

if TYPE_CHECKING:
    from q2api.testing.simulated_upstream import SimulatedUpstream

T = TypeVar("T")


class SimulationThread:
    """A simulator running on its own loop in a daemon thread."""

    def __init__(self, sim: SimulatedUpstream) -> None:
        self.sim = sim
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(sim.start())
            except BaseException as exc:  # pragma: no cover - reported to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(sim.stop())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="q2api-simulated-upstream", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]

    @property
    def url(self) -> str:
        return self.sim.url

    def env(self, auth_method: str = "idc") -> dict[str, str]:
        return self.sim.env(auth_method)

    def enqueue(self, *replies: Reply) -> None:
        self._loop.call_soon_threadsafe(self.sim.enqueue, *replies)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the simulator's loop and wait for its result (e.g. `add_host`)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def revoke_access_token(self, token: str) -> None:
        """From now on Amazon Q refuses `token` (as when it expires), whatever its recorded lifetime."""
        self._loop.call_soon_threadsafe(self.sim.valid_access_tokens.discard, token)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> SimulationThread:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
