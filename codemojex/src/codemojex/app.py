"""The composition root of the running bot: from resolved :class:`BotSettings` it opens the bus
and the store, builds the :class:`~codemojex.pipeline.Pipeline`, and runs the score, settle,
notification and command workers, the gateway (long polling or webhook) and the periodic
sweeps as one async context, reporting each component as it becomes ready.

Settings come resolved: this module reads no environment (``codemojex bot`` does that).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError

from codemojex.bot.context import CommandOptions, Services
from codemojex.bot.gateway import GatewayError, Poller, PollingOptions, fatal
from codemojex.bot.webhook import WebhookGateway, WebhookOptions
from codemojex.bot.worker import CommandWorker
from codemojex.pipeline import Pipeline
from codemojex.store import Store, open_store
from codemojex.store.kv import Valkey
from codemojex.telegram.transport import TelegramConfig, open_bot, redact
from echomq import AppWorker, ConnectionOptions
from echomq.consumers import Metronome
from echomq.engine import Minter
from echomq.metrics import Observer
from echomq.wire import Pool

log = logging.getLogger("codemojex.app")

Mode = Literal["polling", "webhook"]

OnReady = Callable[[str, str], None]
"""Called as ``on_ready(component, detail)`` once per component, in start order."""


@dataclass(frozen=True, slots=True)
class BotSettings:
    """Everything the running bot needs, resolved. URLs and the token stay out of the repr.

    ``prefix`` goes before every queue name and key (several deployments on one Valkey).
    ``pool_consumers``: consumers on each busy queue (score, commands), sharing a metronome.
    """

    echomq_url: str = field(repr=False)
    store_url: str = field(repr=False)
    telegram: TelegramConfig
    mode: Mode = "polling"
    data_dir: Path = Path("var")
    prefix: str = ""
    pool_size: int = 4
    pool_consumers: int = 2
    polling: PollingOptions = field(default_factory=PollingOptions)
    webhook: WebhookOptions = field(default_factory=WebhookOptions)
    commands: CommandOptions = field(default_factory=CommandOptions)
    sweep_every: float = 5.0

    def __post_init__(self) -> None:
        if self.pool_consumers < 1:
            raise ValueError(f"pool_consumers {self.pool_consumers}: at least 1")
        if self.mode not in ("polling", "webhook"):
            raise ValueError(f"mode {self.mode!r}: 'polling' or 'webhook'")


@dataclass(frozen=True, slots=True)
class BotStack:
    """The running bot: its parts, for tests and operators; :meth:`wait` until one fails."""

    pipeline: Pipeline
    bot: Bot
    services: Services
    consumers: dict[str, AppWorker]
    gateway: Poller | WebhookGateway
    tasks: dict[str, asyncio.Task[object]]

    async def wait(self) -> None:
        """Return never while all runs; raise the first component's failure."""
        done, _ = await asyncio.wait(self.tasks.values(), return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        name = next(name for name, task in self.tasks.items() if task in done)
        raise RuntimeError(f"{name} stopped on its own")


async def check_bot(bot: Bot, token: str) -> str:
    """``getMe``: the bot's ``@username``, or :class:`GatewayError` for a refused token."""
    try:
        me = await bot.get_me()
    except TelegramAPIError as error:
        stop = fatal(error, token)
        if stop is not None:
            raise stop from None
        raise GatewayError(
            f"getMe failed: {redact(error.message, token)}", reason="unreachable"
        ) from None
    return f"@{me.username}" if me.username else f"bot {me.id}"


@asynccontextmanager
async def running(
    settings: BotSettings, on_ready: OnReady | None = None, *, observer: Observer | None = None
) -> AsyncIterator[BotStack]:
    """Start the whole bot; the block runs while it serves. Leaving the block (or cancelling
    it) stops the gateway first, then the consumers (jobs in hand finish), then closes the bot
    session, the store and the bus. ``observer`` (e.g. :class:`echomq.metrics.Metrics`) sees
    every consumer's claims and settles."""
    report = on_ready or (lambda component, detail: None)
    async with AsyncExitStack() as stack:
        pool = await Pool(
            ConnectionOptions.from_url(settings.echomq_url), settings.pool_size
        ).connect()
        stack.push_async_callback(pool.close)
        report("engine", f"valkey with a pool of {settings.pool_size}")
        store: Store = await open_store(settings.store_url)
        stack.push_async_callback(store.close)
        report("store", store.dialect)

        # One leased id node for every id this process mints (jobs, players, guesses, ...):
        # several bot or worker processes on one Valkey never mint the same id.
        minter = Minter.leased(pool)
        await minter.ready()
        stack.push_async_callback(minter.release)
        pipeline = Pipeline.build(store, pool, minter=minter, prefix=settings.prefix)
        stack.push_async_callback(pipeline.close)
        # A player's guesses are scored one at a time, in the order sent, so their scores
        # reach their chat in that order (echomq's ordered lanes: the setting lives in the
        # engine, so every score worker process agrees; setting it again is harmless).
        await pipeline.queues.score.ordered(True)
        bot = open_bot(settings.telegram)
        stack.push_async_callback(bot.session.close)
        report("bot", await check_bot(bot, settings.telegram.token))

        services = Services(
            store=store,
            guesses=pipeline.guesses,
            notifier=pipeline.notifier,
            board=pipeline.board,
            minter=pipeline.minter,
            kv=Valkey(pool),
            bot=bot,
            keys=pipeline.keyspace.bot,
            options=settings.commands,
        )
        commands = CommandWorker(services)
        score = Metronome(pipeline.queues.score)
        command = Metronome(pipeline.queues.commands)
        # The busy queues run a pool of workers sharing one metronome (one BLPOP and one
        # upkeep per beat for the pool); settles are rare and the notification worker keeps
        # a chat's sends in order, so those two run one worker each.
        names = [("" if n == 0 else f" {n + 1}") for n in range(settings.pool_consumers)]
        consumers: dict[str, AppWorker] = {
            **{
                f"score worker{suffix}": pipeline.score_consumer(metronome=score, observer=observer)
                for suffix in names
            },
            "settle worker": pipeline.settle_consumer(observer=observer),
            "notification worker": pipeline.notification_consumer(bot, observer=observer),
            **{
                f"command worker{suffix}": pipeline.command_consumer(
                    commands, metronome=command, observer=observer
                )
                for suffix in names
            },
        }
        tasks: dict[str, asyncio.Task[object]] = {}
        metronomes = {"score metronome": score, "command metronome": command}
        stack.push_async_callback(_stop_consumers, consumers, metronomes, tasks)
        for name, metronome in metronomes.items():
            tasks[name] = asyncio.create_task(metronome.run(), name=name)
        pooled = f"{settings.pool_consumers} workers on one metronome"
        for name, consumer in consumers.items():
            tasks[name] = asyncio.create_task(consumer.run(), name=name)
            if name[-1].isdigit():
                continue
            pool_note = f", {pooled}" if consumer.metronome is not None else ""
            report(name, ", ".join(consumer.queues) + pool_note)

        tasks["sweeper"] = asyncio.create_task(
            pipeline.sweep_forever(every=settings.sweep_every), name="sweeper"
        )
        stack.push_async_callback(_cancel, tasks, "sweeper")
        report("sweeper", f"every {settings.sweep_every:g}s")

        gateway: Poller | WebhookGateway
        if settings.mode == "webhook":
            gateway = WebhookGateway(bot, pipeline.tasks.command, settings.webhook)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            report("gateway", f"webhook at {gateway.url}")
        else:
            poll_ready = asyncio.Event()
            gateway = Poller(bot, pipeline.tasks.command, settings.polling, on_ready=poll_ready.set)
            tasks["gateway"] = asyncio.create_task(gateway.run(), name="gateway")
            stack.push_async_callback(_cancel, tasks, "gateway")
            # The first short poll proves the token and that no webhook is set (else it fails).
            ready = asyncio.ensure_future(poll_ready.wait())
            try:
                await asyncio.wait([ready, tasks["gateway"]], return_when=asyncio.FIRST_COMPLETED)
            finally:
                ready.cancel()
            if tasks["gateway"].done():
                tasks["gateway"].result()  # raises the GatewayError
            report("gateway", "long polling")

        yield BotStack(pipeline, bot, services, consumers, gateway, tasks)


async def run_bot(
    settings: BotSettings, on_ready: OnReady | None = None, *, observer: Observer | None = None
) -> None:
    """Run the bot until cancelled (then stop cleanly) or until a component fails (raised)."""
    async with running(settings, on_ready, observer=observer) as stack:
        await stack.wait()


async def _cancel(tasks: dict[str, asyncio.Task[object]], name: str) -> None:
    task = tasks.get(name)
    if task is None:
        return
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _stop_consumers(
    consumers: dict[str, AppWorker],
    metronomes: dict[str, Metronome],
    tasks: dict[str, asyncio.Task[object]],
) -> None:
    for consumer in consumers.values():
        consumer.stop()
    for metronome in metronomes.values():
        metronome.stop()
    runs = [tasks[name] for name in (*consumers, *metronomes) if name in tasks]
    for outcome in await asyncio.gather(*runs, return_exceptions=True):
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            log.warning("a consumer stopped with an error: %s", outcome)
