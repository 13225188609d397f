"""Opening the system of record: an async SQLAlchemy engine on SQLite (a file, WAL, foreign keys
on, writers serialised by ``BEGIN IMMEDIATE``) or PostgreSQL (asyncpg), with the tables created
on open, and the ``Store`` that hands out sessions, each one transaction.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, Index, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.schema import CreateSchema

from codemojex.store.errors import UnsupportedDatabase
from codemojex.store.models import ALLOWANCE_ONCE_INDEX, CONVERT_ONCE_INDEX, Base, LedgerRow

SQLITE_BUSY_TIMEOUT_S: Final = 30.0
"""How long a SQLite writer waits for the write lock before giving up, in seconds."""

log = logging.getLogger("codemojex.store")
_READ_ONLY: Final = "codemojex_read_only"
_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_ASYNC_DRIVERS: Final = {"sqlite": "aiosqlite", "postgresql": "asyncpg"}


def sqlite_url(path: str | Path) -> str:
    """The URL of the SQLite database file at ``path`` (e.g. ``data/codemojex.db``)."""
    return f"sqlite+aiosqlite:///{Path(path)}"


@dataclass(frozen=True, slots=True)
class Store:
    """An open system of record: one engine and its sessions; close it with :meth:`close`."""

    engine: AsyncEngine
    _writer: async_sessionmaker[AsyncSession]
    _reader: async_sessionmaker[AsyncSession]

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session in one transaction: committed when the block ends, rolled back if it raises.

        On SQLite the transaction takes the write lock at its start (``BEGIN IMMEDIATE``), so a
        read-then-write never fails on a stale snapshot and writers queue instead of erroring.
        """
        async with self._writer() as session, session.begin():
            yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A session for reads only: on SQLite it does not wait for (or hold) the write lock."""
        async with self._reader() as session, session.begin():
            yield session

    async def close(self) -> None:
        """Close every pooled connection; the store is unusable afterwards."""
        await self.engine.dispose()


async def open_store(url: str, *, schema: str | None = None) -> Store:
    """Open the database at ``url`` and create any missing tables.

    ``sqlite:///…`` and ``postgresql://…`` get their async drivers (aiosqlite, asyncpg) when the
    URL names none. ``schema`` (PostgreSQL only, a lower-case identifier) puts every table in
    that schema, created if missing: the test suite's way to keep runs apart.
    """
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend not in _ASYNC_DRIVERS:
        raise UnsupportedDatabase(backend)
    if "+" not in parsed.drivername:
        parsed = parsed.set(drivername=f"{backend}+{_ASYNC_DRIVERS[backend]}")
    if schema is not None and (backend != "postgresql" or not _SCHEMA_NAME.fullmatch(schema)):
        raise ValueError(f"schema {schema!r}: a lower-case identifier, on PostgreSQL only")

    if backend == "sqlite":
        engine = create_async_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
        event.listen(engine.sync_engine, "begin", _sqlite_on_begin)
    else:
        settings = {"search_path": schema} if schema is not None else {}
        engine = create_async_engine(parsed, connect_args={"server_settings": settings})

    try:
        async with engine.begin() as connection:
            if schema is not None:
                await connection.execute(CreateSchema(schema, if_not_exists=True))
            await connection.run_sync(Base.metadata.create_all)
            # create_all adds indexes only with new tables: a database made before the
            # convert-once and allowance-once indexes gets them here.
            await connection.run_sync(_ledger_index(CONVERT_ONCE_INDEX).create, checkfirst=True)
            await _add_allowance_once_index(connection)
    except BaseException:
        await engine.dispose()
        raise
    return Store(
        engine=engine,
        _writer=async_sessionmaker(engine, expire_on_commit=False),
        _reader=async_sessionmaker(
            engine.execution_options(**{_READ_ONLY: True}), expire_on_commit=False
        ),
    )


def _ledger_index(name: str) -> Index:
    ledger = Base.metadata.tables[LedgerRow.__tablename__]
    return next(index for index in ledger.indexes if index.name == name)


async def _add_allowance_once_index(connection: AsyncConnection) -> None:
    # A database written before issue 29.6 may hold a day with several grants (the race the
    # index closes): it then opens without the index, with a warning; the grant's row lock
    # still serialises new grants.
    try:
        async with connection.begin_nested():
            await connection.run_sync(_ledger_index(ALLOWANCE_ONCE_INDEX).create, checkfirst=True)
    except IntegrityError:
        log.warning(
            "ledger index %s not created: the ledger already holds a day with two allowances",
            ALLOWANCE_ONCE_INDEX,
        )


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from the sqlite3 module (which would BEGIN lazily, DEFERRED,
    # and breaks SAVEPOINT); _sqlite_on_begin emits the BEGIN instead.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    # A DEFERRED transaction that reads and then writes fails at once (SQLITE_BUSY_SNAPSHOT) when
    # another writer committed in between; IMMEDIATE takes the lock first and waits for it.
    is_read_only = connection.get_execution_options().get(_READ_ONLY, False)
    connection.exec_driver_sql("BEGIN DEFERRED" if is_read_only else "BEGIN IMMEDIATE")
