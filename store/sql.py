"""SQL helpers shared by the repository modules."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from store.models import Base

Sessions = sessionmaker[Session]


def insert_ignoring_duplicates(
    session: Session, model: type[Base], rows: list[dict[str, Any]]
) -> int:
    """INSERT … ON CONFLICT DO NOTHING; returns how many rows were new."""
    if not rows:
        return 0
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    # RETURNING counts the rows really inserted; rowcount is -1 for multi-row inserts on psycopg.
    table = cast(Table, model.__table__)
    key = next(iter(table.primary_key.columns))
    # Rows as parameters (executemany with RETURNING), not baked into the statement: the
    # statement then compiles once per process, not once per call (a tenth of a worker's CPU).
    statement = insert(table).on_conflict_do_nothing().returning(key)
    return len(session.execute(statement, rows).all())
