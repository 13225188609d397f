"""The event loop a worker process runs on: asyncio's own, or uvloop's (the ``echomq[uvloop]``
extra, the default loop of ``uvicorn[standard]`` and ``fastapi run``). ``auto`` takes uvloop
when it is installed, asyncio's loop otherwise; asking for uvloop without it is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from echomq._extras import missing
from echomq.errors import InvalidArgument

T = TypeVar("T")

#: The names ``--loop`` takes.
LOOPS = ("auto", "asyncio", "uvloop")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def choose(name: str) -> tuple[str, LoopFactory]:
    """The loop ``name`` asks for, as the name of the one it runs on and its factory;
    ``InvalidArgument`` (naming ``--loop``) for an unknown name, or uvloop when it is absent."""
    if name not in LOOPS:
        raise InvalidArgument("--loop", name, "asyncio, uvloop or auto")
    if name == "asyncio":
        return "asyncio", asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        if name == "uvloop":
            raise InvalidArgument("--loop", name, missing("uvloop", "--loop uvloop")) from None
        return "asyncio", asyncio.new_event_loop
    return "uvloop", uvloop.new_event_loop


def run_on(factory: LoopFactory, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a loop ``factory`` makes (Python 3.11's ``asyncio.run`` takes
    no factory; its ``Runner`` does)."""
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
