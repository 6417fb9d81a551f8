"""Remember the last observed run counts on each binding.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bindings") as batch:
        batch.add_column(sa.Column("run_counts", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bindings") as batch:
        batch.drop_column("run_counts")
