"""``echomq worker --processes N``: one event loop is one core, so N cores need N processes.

The supervisor starts N ``python -m echomq ... worker ...`` children (the same arguments minus
``--processes`` and ``--url``: the URL, which may hold a password, travels in the children's
``ECHOMQ_URL``, never on a command line another user can read), each with a pipe it writes once
its worker is ready (``--ready-fd``). It restarts a child that exits non-zero while not
stopping: at once when the child had been ready (killed while working: the pool stays full
under kills), after a capped doubling delay per slot when it died before it was ready (a crash
loop: echomq.tasks.restarts). It forwards SIGTERM/SIGINT to every child, waits up to the stop
timeout, then kills the stragglers (a second signal kills them at once); it exits non-zero when
a child failed to stop cleanly. A child that exits with 2 (its arguments or its App are wrong)
is not restarted: every child would fail the same way. The children die with the supervisor,
even when it is killed (Linux: PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence

from echomq.server.embedded import _die_with_parent
from echomq.tasks.restarts import RestartPolicy, Slot

log = logging.getLogger("echomq.supervisor")

#: Beyond the stop timeout (which the children spend finishing their jobs), how long the
#: supervisor lets them close their connections before it kills them.
GRACE = 2.0
#: A child's exit status for refused arguments (argparse's, and ``echomq worker``'s own).
USAGE_ERROR = 2
#: After a child exited, how long the supervisor waits for its readiness byte still in the pipe
#: (the child is gone, so the pipe is at its end at once unless a grandchild kept it open).
READY_DRAIN = 1.0
#: A ready child that exits on its own with an error within this many seconds of being ready is
#: counted as a crash-loop exit (a bug at its first claim), not as a worker that had been
#: working: killed by a signal, or stopped from outside (exit 0 without --burst), it is
#: restarted at once however soon.
WORKED = 10.0
#: What a child must not inherit from the supervisor's command line (each takes a value).
_STRIPPED = ("--processes", "--url", "--ready-fd")


def child_arguments(argv: Sequence[str]) -> list[str]:
    """``argv`` without ``--processes N``, ``--url URL`` and ``--ready-fd FD`` (either spelled
    ``--x=value``).
    The parser refuses abbreviations (``allow_abbrev=False``), so these are the only forms."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _STRIPPED:
            skip = True
        elif not arg.startswith(tuple(f"{name}=" for name in _STRIPPED)):
            out.append(arg)
    return out


class Supervisor:
    """Keeps ``processes`` workers running ``argv`` (the ``echomq`` arguments) until stopped."""

    def __init__(
        self,
        argv: Sequence[str],
        processes: int,
        stop_timeout: float,
        url: str | None = None,
        policy: RestartPolicy | None = None,
    ) -> None:
        self.command = [sys.executable, "-m", "echomq", *child_arguments(argv)]
        #: A --burst pool's children end when their queues are drained (exit 0): not restarted.
        self.is_burst = "--burst" in argv
        self.env = None if url is None else {**os.environ, "ECHOMQ_URL": url}
        self._preexec = _die_with_parent()  # resolved here, in the thread that forks
        self.processes = processes
        self.stop_timeout = stop_timeout
        self.policy = policy or RestartPolicy()
        self.children: dict[int, asyncio.subprocess.Process] = {}
        #: Each slot's restart record (consecutive children that died before they were ready).
        self.slots = [Slot() for _ in range(processes)]
        self.restarts = 0
        self._stopping = asyncio.Event()
        self._failed = False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Forward ``sig`` to every child and let none restart; a second signal kills them."""
        if self._stopping.is_set():
            log.warning("supervisor: %s again, killing the workers", signal.Signals(sig).name)
            sig = signal.SIGKILL
            self._failed = True
        else:
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
        slots = [asyncio.ensure_future(self._keep(slot)) for slot in range(self.processes)]
        killer = asyncio.ensure_future(self._kill_late())
        try:
            await asyncio.gather(*slots)
        except BaseException:
            # A slot failed to start its child (say, no memory): stop the others, never leave
            # them running unattended.
            log.exception("supervisor: a worker slot failed; stopping the others")
            self._failed = True
            self.stop()
            for slot in slots:
                slot.cancel()
            await asyncio.gather(*slots, return_exceptions=True)
            await self._reap()
            raise
        finally:
            killer.cancel()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
        return 1 if self._failed else 0

    async def _keep(self, slot: int) -> None:
        """One slot: run a child, restart it while it crashes and the supervisor is not stopping."""
        while not self._stopping.is_set():
            child, ready = await self._start(slot)
            self.children[slot] = child
            if self._stopping.is_set():  # a signal arrived while it was starting
                with contextlib.suppress(ProcessLookupError):
                    child.terminate()
            code = await child.wait()
            ready_at = await _was_ready(ready)
            was_ready = ready_at is not None
            if self._stopping.is_set():
                if code != 0:
                    log.warning(
                        "supervisor: worker %d (pid %d) stopped with %d", slot, child.pid, code
                    )
                    self._failed = True
                break
            if code == 0 and self.is_burst:
                log.info("supervisor: worker %d (pid %d) finished", slot, child.pid)
                break  # --burst: its queues drained; nothing to restart
            if code == USAGE_ERROR:
                log.error(
                    "supervisor: worker %d (pid %d) refused its arguments (exit 2): not "
                    "restarting; stopping the others",
                    slot,
                    child.pid,
                )
                self._failed = True
                self.stop()
                break
            # Killed (a signal) or stopped from outside (0): it had been working if it was ready.
            # Failed on its own (> 0): only once it had served a while, else a crash loop.
            worked = ready_at is not None and (
                code <= 0 or asyncio.get_running_loop().time() - ready_at >= WORKED
            )
            self.slots[slot] = state = self.slots[slot].exited(was_ready=worked)
            delay = self.policy.delay(state)
            if worked:
                log.warning(
                    "supervisor: worker %d (pid %d) %s after it was ready; restarting now",
                    slot, child.pid, _exit_text(code),
                )  # fmt: skip
            else:
                log.warning(
                    "supervisor: worker %d (pid %d) %s %s (%d in a row); restarting in %.1f s",
                    slot, child.pid, _exit_text(code),
                    "soon after it was ready" if was_ready else "before it was ready",
                    state.early_exits, delay,
                )  # fmt: skip
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
            self.restarts += 1
        self.children.pop(slot, None)

    async def _start(
        self, slot: int
    ) -> tuple[asyncio.subprocess.Process, asyncio.Future[float | None]]:
        """Start ``slot``'s child with the write end of a pipe it writes one byte to once its
        worker is ready; the future answers when that byte came (loop time), or None when the
        pipe ended without it."""
        read_end, write_end = os.pipe()  # both close-on-exec: no other child inherits them
        try:
            child = await asyncio.create_subprocess_exec(
                *self.command,
                "--ready-fd",
                str(write_end),
                env=self.env,
                preexec_fn=self._preexec,
                pass_fds=(write_end,),
            )
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)  # the child's copy is the only one: its exit ends the pipe
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[float | None] = loop.create_future()

        def readable() -> None:
            loop.remove_reader(read_end)
            try:
                data = os.read(read_end, 1)
            except OSError:
                data = b""
            os.close(read_end)
            if data:
                log.info("supervisor: worker %d (pid %d) is ready", slot, child.pid)
            if not ready.done():
                ready.set_result(loop.time() if data else None)

        loop.add_reader(read_end, readable)
        return child, ready

    async def _reap(self) -> None:
        """Kill what still runs and wait for it (the supervisor never leaves orphans)."""
        for child in list(self.children.values()):
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()

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


async def _was_ready(ready: asyncio.Future[float | None]) -> float | None:
    """When an exited child had said it was ready (loop time), or None: its byte may still sit
    in the pipe."""
    with contextlib.suppress(TimeoutError):
        return await asyncio.wait_for(asyncio.shield(ready), READY_DRAIN)
    return None


def _exit_text(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with {code}"


def supervise(
    argv: Sequence[str], processes: int, stop_timeout: float, url: str | None = None
) -> int:
    """Run the supervisor to its end; its exit status. ``url``: the server the children serve
    (handed over in their environment)."""
    return asyncio.run(Supervisor(argv, processes, stop_timeout, url).run())
