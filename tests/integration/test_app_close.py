"""An App closed while its connection is still being made: the connect ends with the close, and
leaves no socket open (a worker stopped as it started did that on a loaded machine, and the
suite's leak check caught the sockets on a cluster)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit

from echomq import App
from echomq.server import EmbeddedValkey


async def test_an_app_closed_while_connecting_leaves_no_socket_open(
    valkey_server: EmbeddedValkey,
) -> None:
    upstream = urlsplit(valkey_server.url)
    held, release, client_gone = asyncio.Event(), asyncio.Event(), asyncio.Event()
    writers: list[asyncio.StreamWriter] = []

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
        sink.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The first connection's first bytes (the handshake) wait for `release`; then the
        # relay joins it to the real server, and says when the app's side has gone.
        writers.append(writer)
        first = await reader.read(65536)
        held.set()
        await release.wait()
        up_reader, up_writer = await asyncio.open_connection(upstream.hostname, upstream.port)
        writers.append(up_writer)
        up_writer.write(first)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        client_gone.set()

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    through = urlunsplit(upstream._replace(netloc=f"127.0.0.1:{port}"))
    app = App(through, queue="app-close")
    try:
        connecting = asyncio.ensure_future(app.connect())
        await asyncio.wait_for(held.wait(), 5)
        await app.close()  # the connect is still waiting for its handshake's answer
        release.set()  # the answer would come now: nothing may take it up
        await asyncio.wait_for(client_gone.wait(), 5)
        outcome = await asyncio.gather(connecting, return_exceptions=True)
        assert isinstance(outcome[0], BaseException)  # the connect did not succeed after close
    finally:
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()
