"""``echomq worker --processes N``: one event loop is one core, so N cores need N processes.

The supervisor starts N ``python -m echomq ... worker ...`` children (the same arguments minus
``--processes``), restarts one that crashes (a non-zero exit while not stopping) after a capped
backoff, forwards SIGTERM/SIGINT to every child, waits up to the stop timeout, then kills the
stragglers; it exits non-zero when a child failed to stop cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Sequence

log = logging.getLogger("echomq.supervisor")

#: The first restart's delay and the cap of the doubling that follows (seconds).
RESTART_BASE = 0.5
RESTART_CAP = 30.0
#: A child that ran this long before crashing restarts after the base delay again.
RESTART_RESET = 60.0
#: Beyond the stop timeout (which the children spend finishing their jobs), how long the
#: supervisor lets them close their connections before it kills them.
GRACE = 2.0


def child_arguments(argv: Sequence[str]) -> list[str]:
    """``argv`` without ``--processes N`` / ``--processes=N``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--processes":
            skip = True
        elif not arg.startswith("--processes="):
            out.append(arg)
    return out


class Supervisor:
    """Keeps ``processes`` workers running ``argv`` (the ``echomq`` arguments) until stopped."""

    def __init__(self, argv: Sequence[str], processes: int, stop_timeout: float) -> None:
        self.command = [sys.executable, "-m", "echomq", *child_arguments(argv)]
        self.processes = processes
        self.stop_timeout = stop_timeout
        self.children: dict[int, asyncio.subprocess.Process] = {}
        self.restarts = 0
        self._stopping = asyncio.Event()
        self._failed = False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Forward ``sig`` to every child and let none restart."""
        if not self._stopping.is_set():
            log.info(
                "supervisor: %s, stopping %d workers", signal.Signals(sig).name, len(self.children)
            )
        self._stopping.set()
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(sig)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop, sig)
        log.info("supervisor: starting %d worker processes", self.processes)
        try:
            slots = [asyncio.ensure_future(self._keep(slot)) for slot in range(self.processes)]
            killer = asyncio.ensure_future(self._kill_late())
            await asyncio.gather(*slots)
            killer.cancel()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
        return 1 if self._failed else 0

    async def _keep(self, slot: int) -> None:
        """One slot: run a child, restart it while it crashes and the supervisor is not stopping."""
        crashes = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            child = await asyncio.create_subprocess_exec(*self.command)
            self.children[slot] = child
            if self._stopping.is_set():  # a signal arrived while it was starting
                with contextlib.suppress(ProcessLookupError):
                    child.terminate()
            code = await child.wait()
            if self._stopping.is_set():
                if code != 0:
                    log.warning(
                        "supervisor: worker %d (pid %d) stopped with %d", slot, child.pid, code
                    )
                    self._failed = True
                break
            if code == 0:
                log.info("supervisor: worker %d (pid %d) finished", slot, child.pid)
                break  # --burst: its queues drained; nothing to restart
            crashes = 1 if time.monotonic() - started >= RESTART_RESET else crashes + 1
            delay = min(RESTART_CAP, RESTART_BASE * 2 ** (crashes - 1))
            log.warning(
                "supervisor: worker %d (pid %d) exited with %d; restarting in %.1f s",
                slot, child.pid, code, delay,
            )  # fmt: skip
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            self.restarts += 1
        self.children.pop(slot, None)

    async def _kill_late(self) -> None:
        await self._stopping.wait()
        await asyncio.sleep(self.stop_timeout + GRACE)
        for slot, child in list(self.children.items()):
            if child.returncode is None:
                log.error(
                    "supervisor: worker %d (pid %d) did not stop: killing it", slot, child.pid
                )
                self._failed = True
                with contextlib.suppress(ProcessLookupError):
                    child.kill()


def supervise(argv: Sequence[str], processes: int, stop_timeout: float) -> int:
    """Run the supervisor to its end; its exit status."""
    return asyncio.run(Supervisor(argv, processes, stop_timeout).run())
