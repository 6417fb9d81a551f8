"""Remember the state backfillctl applied (to tell a spec change from drift) and the last reason.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bindings") as batch:
        batch.add_column(sa.Column("applied_state", sa.String(20), nullable=False, server_default="active"))
        batch.add_column(sa.Column("detail", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bindings") as batch:
        batch.drop_column("detail")
        batch.drop_column("applied_state")
