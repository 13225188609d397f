"""The wire, side by side: echomq's connector vs valkey-py asyncio on the same embedded server.

Run: ``.venv/bin/python bench/wire.py [--runs 5] [--calls 20000] [--url valkey://…]``.
Prints ops/s and client CPU µs per call (this process's CPU time / calls; the server's CPU is
not counted), each the median of ``--runs`` runs, and the ratio echomq / valkey-py.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import valkey.asyncio as valkey_asyncio

from _harness import serve
from echomq.wire.connector import Connector
from echomq.wire.url import ConnectionOptions

SCRIPT = "return redis.call('INCR', KEYS[1])"


@dataclass
class Figure:
    ops: float
    cpu_us: float


async def measure(calls: int, body: Callable[[], Awaitable[None]]) -> Figure:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await body()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return Figure(calls / wall, cpu / calls * 1e6)


def cases(calls: int, sha: str) -> dict[str, Callable[[object], Callable[[], Awaitable[None]]]]:
    key = "bench:{wire}:n"

    def sequential_ping(client: object) -> Callable[[], Awaitable[None]]:
        async def body() -> None:
            for _ in range(calls):
                await client.execute_command("PING")  # type: ignore[attr-defined]

        return body

    def sequential_evalsha(client: object) -> Callable[[], Awaitable[None]]:
        async def body() -> None:
            for _ in range(calls):
                await client.execute_command("EVALSHA", sha, 1, key)  # type: ignore[attr-defined]

        return body

    def concurrent_evalsha(client: object) -> Callable[[], Awaitable[None]]:
        async def task(n: int) -> None:
            for _ in range(n):
                await client.execute_command("EVALSHA", sha, 1, key)  # type: ignore[attr-defined]

        async def body() -> None:
            await asyncio.gather(*(task(calls // 50) for _ in range(50)))

        return body

    def pipelines(client: object) -> Callable[[], Awaitable[None]]:
        async def body() -> None:
            for _ in range(calls // 100):
                await client.pipeline100()  # type: ignore[attr-defined]

        return body

    return {
        "sequential PING": sequential_ping,
        "sequential EVALSHA": sequential_evalsha,
        "EVALSHA, 50 concurrent tasks": concurrent_evalsha,
        "100-command pipelines": pipelines,
    }


class EchoClient:
    """Adapts the connector to the shape the cases call."""

    def __init__(self, conn: Connector, sha: str) -> None:
        self.conn = conn
        self.batch = [("EVALSHA", sha, 1, "bench:{wire}:n")] * 100

    def execute_command(self, *args: object) -> Awaitable[object]:
        return self.conn.call(*args)  # type: ignore[arg-type]

    async def pipeline100(self) -> None:
        await self.conn.call_many(self.batch)


class ValkeyPyClient:
    def __init__(self, client: valkey_asyncio.Valkey, sha: str) -> None:
        self.client = client
        self.sha = sha

    def execute_command(self, *args: object) -> Awaitable[object]:
        return self.client.execute_command(*args)

    async def pipeline100(self) -> None:
        pipe = self.client.pipeline(transaction=False)
        for _ in range(100):
            pipe.execute_command("EVALSHA", self.sha, 1, "bench:{wire}:n")
        await pipe.execute()


async def run(url: str, runs: int, calls: int) -> None:
    opts = ConnectionOptions.from_url(url)
    conn = await Connector(opts).connect()
    sha = (await conn.call("SCRIPT", "LOAD", SCRIPT)).decode()
    peer = valkey_asyncio.Valkey.from_url(url.replace("valkey://", "redis://"), max_connections=64)
    clients = {"echomq": EchoClient(conn, sha), "valkey-py": ValkeyPyClient(peer, sha)}
    print(f"{calls} calls per run, median of {runs} runs; client CPU is this process only\n")
    print(
        "| case | echomq ops/s | valkey-py ops/s | ratio "
        "| echomq µs CPU/call | valkey-py µs CPU/call |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, make in cases(calls, sha).items():
        figures: dict[str, list[Figure]] = {label: [] for label in clients}
        for _ in range(runs):
            for label, client in clients.items():  # interleaved so noise hits both alike
                figures[label].append(await measure(calls, make(client)))
        ops = {k: statistics.median(f.ops for f in v) for k, v in figures.items()}
        cpu = {k: statistics.median(f.cpu_us for f in v) for k, v in figures.items()}
        print(
            f"| {name} | {ops['echomq']:,.0f} | {ops['valkey-py']:,.0f} | "
            f"{ops['echomq'] / ops['valkey-py']:.2f}× "
            f"| {cpu['echomq']:.1f} | {cpu['valkey-py']:.1f} |"
        )
    await conn.close()
    await peer.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20_000)
    return serve(parser, lambda url, args: run(url, args.runs, args.calls))


if __name__ == "__main__":
    sys.exit(main())
