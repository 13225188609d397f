"""The wire's fault drill at the scale of issue 31, as figures: what callers see while their
sockets are cut again and again.

* **calls**: ``--tasks`` tasks call ``INCR``/``HGETALL`` through one connector whose URL names
  database 1 and a user with a password, while a thread kills that user's sockets every
  ``--cut-every`` seconds for ``--seconds``. Counted: acknowledged writes, writes that landed in
  database 0, ``NOAUTH`` refusals, RESP2 replies (commands before ``HELLO 3``), untyped errors,
  calls slower than their timeout, and calls still pending ``--grace`` seconds after the cuts.
* **waits**: ``Queue.wait`` on finished jobs, 50 at a time, while the waiting queue's sockets
  are cut every ``--wait-cut-every`` seconds: how many raised ``Disconnected`` (a cut is not an
  answer).

Run it against whichever echomq is on the import path (``PYTHONPATH=old/src`` for another
checkout) to compare designs: ``.venv/bin/python bench/faults.py --rounds 3``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import threading
import time
import uuid
from collections import Counter

import valkey

from echomq import ConnectionOptions, EchoMQError, Queue
from echomq.server import EmbeddedValkey, ServerOptions
from echomq.testing import discard
from echomq.wire import Connector

#: Figures printed even when zero (the ones that must be).
FIGURES = (
    "RESP2 replies",
    "NOAUTH",
    "untyped errors",
    "calls past their timeout",
    "calls hung",
    "writes in database 0",
    "acknowledged writes lost",
    "waits Disconnected",
)
PASSWORD = uuid.uuid4().hex  # the drill server's own, made fresh each run


def _cut_every(url: str, user: str, interval: float, stop: threading.Event) -> int:
    cuts = 0
    with valkey.Valkey.from_url(url) as client:
        while not stop.wait(interval):
            cuts += int(client.execute_command("CLIENT", "KILL", "USER", user))
    return cuts


async def _user(admin: Connector) -> tuple[str, str]:
    user, secret = f"b{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    await admin.call("ACL", "SETUSER", user, "on", f">{secret}", "~*", "&*", "+@all")
    return user, secret


async def calls_drill(
    server: EmbeddedValkey, admin: Connector, args: argparse.Namespace
) -> Counter:
    user, secret = await _user(admin)
    key = f"faults:{uuid.uuid4().hex}"
    hkey = key + ":h"
    await admin.call("SELECT", 1)
    await admin.call("HSET", hkey, "f", "v")
    await admin.call("SELECT", 0)
    opts = ConnectionOptions.from_url(server.url).replace(
        username=user, password=secret, db=1, call_timeout=args.call_timeout
    )
    seen: Counter[str] = Counter()
    stop = asyncio.Event()
    connector = await Connector(opts).connect()

    async def caller(n: int) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                if n % 5:
                    await connector.call("INCR", key)
                    seen["acknowledged writes"] += 1
                else:
                    reply = await connector.call("HGETALL", hkey)
                    if not isinstance(reply, dict):
                        seen["RESP2 replies"] += 1
            except EchoMQError as exc:
                seen["typed errors"] += 1
                if "NOAUTH" in str(exc):
                    seen["NOAUTH"] += 1
            except Exception:  # the drill counts what no caller expects
                seen["untyped errors"] += 1
            if time.monotonic() - started > args.call_timeout + 0.5:
                seen["calls past their timeout"] += 1

    tasks = [asyncio.ensure_future(caller(n)) for n in range(args.tasks)]
    storm = threading.Event()
    killer = asyncio.ensure_future(
        asyncio.to_thread(_cut_every, server.url, user, args.cut_every, storm)
    )
    await asyncio.sleep(args.seconds)
    storm.set()
    stop.set()
    seen["cuts"] = await killer
    _, pending = await asyncio.wait(tasks, timeout=args.grace)
    seen["calls hung"] = len(pending)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    await connector.close()
    await admin.call("SELECT", 0)
    seen["writes in database 0"] = int(await admin.call("GET", key) or 0)
    await admin.call("DEL", key)
    await admin.call("SELECT", 1)
    landed = int(await admin.call("GET", key) or 0)
    seen["acknowledged writes lost"] = max(seen["acknowledged writes"] - landed, 0)
    await admin.call("DEL", key, hkey)
    await admin.call("SELECT", 0)
    await admin.call("ACL", "DELUSER", user)
    return seen


async def waits_drill(
    server: EmbeddedValkey, admin: Connector, args: argparse.Namespace
) -> Counter:
    user, secret = await _user(admin)
    url = server.url.replace("://:", f"://{user}:").replace(PASSWORD, secret)
    name = f"faults-{uuid.uuid4().hex[:8]}"
    waiting = await Queue.connect(url, name, result_ttl=600)
    settling = await Queue.connect(server.url, name, result_ttl=600)
    seen: Counter[str] = Counter()
    ids = [v.id for v in await settling.enqueue_many([{"n": n} for n in range(args.waits)])]
    while isinstance(claimed := await settling.claim_batch(500), list) and claimed:
        await settling.complete_many(claimed)
    storm = threading.Event()
    killer = asyncio.ensure_future(
        asyncio.to_thread(_cut_every, server.url, user, args.wait_cut_every, storm)
    )
    storm_ends = time.monotonic() + args.seconds
    while time.monotonic() < storm_ends:  # round after round over the same finished jobs
        for start in range(0, len(ids), 50):
            for outcome in await asyncio.gather(
                *(waiting.wait(i, timeout=30) for i in ids[start : start + 50]),
                return_exceptions=True,
            ):
                kind = type(outcome).__name__ if isinstance(outcome, BaseException) else "answered"
                seen[f"waits {kind}"] += 1
    storm.set()
    seen["wait cuts"] = await killer
    await waiting.close()
    await discard(settling)
    await admin.call("ACL", "DELUSER", user)
    return seen


async def main(args: argparse.Namespace) -> None:
    logging.getLogger("echomq").setLevel(logging.ERROR)  # a reconnect per cut is the point
    rounds: list[Counter] = []
    with EmbeddedValkey(ServerOptions(password=PASSWORD)) as server:
        async with Connector(ConnectionOptions.from_url(server.url)) as admin:
            for n in range(args.rounds):
                seen = await calls_drill(server, admin, args)
                seen += await waits_drill(server, admin, args)
                rounds.append(seen)
                print(f"round {n + 1}: {dict(sorted(seen.items()))}", flush=True)
    keys = sorted(set().union(*rounds, FIGURES))
    print(f"\n| figure | median of {args.rounds} | min | max |\n|---|---:|---:|---:|")
    for key in keys:
        values = [r[key] for r in rounds]
        print(f"| {key} | {statistics.median(values):g} | {min(values)} | {max(values)} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--cut-every", type=float, default=0.05)
    parser.add_argument("--call-timeout", type=float, default=5.0)
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--waits", type=int, default=6000)
    parser.add_argument("--wait-cut-every", type=float, default=0.2)
    asyncio.run(main(parser.parse_args()))
