"""Alembic environment: always run with a connection handed in by the store (no ini file, no URL)."""

from alembic import context

from controller.adapters.store.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
