"""The notification outbox: rows written in the same transaction as their audit record.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_SEQ = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "notifications",
        sa.Column("id", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(200), nullable=False, unique=True),
        sa.Column("audit_seq", _SEQ, nullable=False, index=True),
        sa.Column("receiver", sa.String(100), nullable=False),
        sa.Column("event", sa.String(40), nullable=False),
        sa.Column("format", sa.String(20), nullable=False),
        sa.Column("facts", sa.JSON, nullable=False),
        sa.Column("status", sa.String(20), nullable=False, index=True),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.String(40), nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("delivered_at", sa.String(40)),
    )


def downgrade() -> None:
    op.drop_table("notifications")
