"""Engines and sessions, made from a URL when a process starts (never at import)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from jury.errors import ConfigurationError
from jury.store.models import Base

# How long a SQLite writer waits for another process's write lock before giving up.
SQLITE_BUSY_TIMEOUT_MS = 60_000

# The databases jury is tested against (and ships the drivers of).
SUPPORTED_BACKENDS = ("sqlite", "postgresql")

# Execution option marking a write transaction (see _configure_sqlite).
WRITE_OPTION = "jury_write"

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def _normalise(url: str) -> str:
    # `postgresql://` means psycopg 3 here: it is the driver we ship.
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _configure_sqlite(engine: Engine) -> None:
    """WAL lets readers run beside one writer. Write transactions (marked with the execution
    option WRITE_OPTION) begin IMMEDIATE: they take the write lock up front, so concurrent
    writers from several worker processes queue on busy_timeout instead of failing on a
    read-to-write lock upgrade. Reads begin DEFERRED and never block a writer."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(WRITE_OPTION)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


# Any constant: the PostgreSQL advisory lock that serializes schema creation.
_SCHEMA_LOCK = 0x6A757279


def _create_schema(engine: Engine) -> None:
    """Create missing tables; several processes starting at once must not race on it."""
    writer = engine.execution_options(**{WRITE_OPTION: True})  # SQLite: BEGIN IMMEDIATE
    with writer.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
        Base.metadata.create_all(connection)
        _add_missing_columns(connection)


def _add_missing_columns(connection: Connection) -> None:
    """Add the nullable columns a newer jury declares to the tables an older one created
    (`jury_samples.vote`, say): old rows read them as NULL, which means "not asked". A column
    that must hold a value is never added here."""
    inspector = inspect(connection)
    for table in Base.metadata.sorted_tables:
        if not inspector.has_table(table.name):
            continue
        present = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present or not column.nullable or column.primary_key:
                continue
            kind = column.type.compile(dialect=connection.dialect)
            connection.execute(text(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}'))


def get_engine(url: str) -> Engine:
    """One engine per URL per process, with its tables created."""
    url = _normalise(url)
    with _lock:
        engine = _engines.get(url)
        if engine is not None:
            return engine
        try:
            parsed = make_url(url)
        except Exception as exc:
            raise ConfigurationError(f"JURY_DATABASE_URL {url!r} is not a database URL") from exc
        if parsed.get_backend_name() not in SUPPORTED_BACKENDS:
            raise ConfigurationError(
                f"JURY_DATABASE_URL uses {parsed.get_backend_name()!r}, which jury does not "
                "support: it stores results in SQLite (sqlite:///jury.db, one machine) or "
                "PostgreSQL (postgresql://user:password@host/db, for several machines)"
            )
        kwargs: dict[str, Any] = {}
        if parsed.get_backend_name() == "sqlite":
            kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
        else:
            kwargs.update(pool_pre_ping=True, pool_size=10, max_overflow=20)
        engine = create_engine(url, **kwargs)
        if parsed.get_backend_name() == "sqlite":
            _configure_sqlite(engine)
        try:
            _create_schema(engine)
        except Exception as exc:
            engine.dispose()
            raise ConfigurationError(
                f"cannot open the database {parsed.render_as_string(hide_password=True)}: {exc}"
            ) from exc
        _engines[url] = engine
        return engine


def session_factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(get_engine(url), expire_on_commit=False)


@contextlib.contextmanager
def write_transaction(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """A session in one write transaction: committed on success, rolled back on error."""
    with sessions.begin() as session:
        session.connection(execution_options={WRITE_OPTION: True})
        yield session


@contextlib.contextmanager
def core_transaction(sessions: sessionmaker[Session], write: bool = True) -> Iterator[Connection]:
    """A Core connection in one transaction (a write one unless told), without an ORM
    session: the engine's hot paths (storing samples, the chord's barrier, cache lookups)
    spend a third less CPU per statement so."""
    engine: Engine = sessions.kw["bind"]
    options = {WRITE_OPTION: True} if write else {}
    with engine.connect().execution_options(**options) as connection, connection.begin():
        yield connection


def release_engine(url: str) -> None:
    """Close this process's engine for `url` and forget it: its connections are closed (a
    SQLite file can then be deleted), and a later use opens a new one."""
    with _lock:
        engine = _engines.pop(_normalise(url), None)
    if engine is not None:
        engine.dispose()


def dispose_all() -> None:
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
