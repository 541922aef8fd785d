"""Alembic environment for the service store; run programmatically by :func:`cohabit.service.store.migrate`
with an open connection in ``config.attributes["connection"]``."""

from __future__ import annotations

from alembic import context

from cohabit.service.db import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
