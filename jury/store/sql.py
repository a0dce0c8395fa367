"""SQL helpers shared by the repository modules."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from jury.store.models import Base

Sessions = sessionmaker[Session]


Executor = Session | Connection


def inserted_values(
    session: Executor, model: type[Base], rows: list[dict[str, Any]], column: Any = None
) -> list[Any]:
    """INSERT … ON CONFLICT DO NOTHING; returns `column` (default: the primary key) of each
    row that was new."""
    return [value for (value,) in inserted_rows(session, model, rows, column)]


def inserted_rows(
    session: Executor, model: type[Base], rows: list[dict[str, Any]], *columns: Any
) -> list[tuple[Any, ...]]:
    """INSERT … ON CONFLICT DO NOTHING; returns `columns` (default: the primary key) of each
    row that was new, in one round trip for all of them."""
    if not rows:
        return []
    bind = session if isinstance(session, Connection) else session.get_bind()
    dialect = bind.dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    # RETURNING names the rows really inserted; rowcount is -1 for multi-row inserts on psycopg.
    table = cast(Table, model.__table__)
    returned = [c for c in columns if c is not None] or [next(iter(table.primary_key.columns))]
    # Rows as parameters (executemany with RETURNING), not baked into the statement: the
    # statement then compiles once per process, not once per call (a tenth of a worker's CPU).
    statement = insert(table).on_conflict_do_nothing().returning(*returned)
    return [tuple(row) for row in session.execute(statement, rows).all()]


def insert_ignoring_duplicates(
    session: Executor, model: type[Base], rows: list[dict[str, Any]]
) -> int:
    """INSERT … ON CONFLICT DO NOTHING; returns how many rows were new."""
    return len(inserted_values(session, model, rows))
