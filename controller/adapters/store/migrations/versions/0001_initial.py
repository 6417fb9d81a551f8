"""Bindings, audit events and the lease.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bindings",
        sa.Column("spec_name", sa.String(100), primary_key=True),
        sa.Column("airflow_url", sa.String(500), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("backfill_id", sa.Integer, nullable=True),
        sa.Column("spec_digest", sa.String(80), nullable=False),
        sa.Column("git_commit", sa.String(64), nullable=True),
        sa.Column("phase", sa.String(32), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "audit_events",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=False),
        sa.Column("time", sa.String(40), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("controller_version", sa.String(40), nullable=False),
        sa.Column("git_commit", sa.String(64)),
        sa.Column("spec_name", sa.String(100), index=True),
        sa.Column("spec_path", sa.String(500)),
        sa.Column("spec_digest", sa.String(80)),
        sa.Column("dag_id", sa.String(250), index=True),
        sa.Column("backfill_id", sa.Integer),
        sa.Column("action", sa.String(40), nullable=False, index=True),
        sa.Column("phase", sa.String(20), nullable=False),
        sa.Column("outcome", sa.String(60)),
        sa.Column("request", sa.JSON),
        sa.Column("response", sa.JSON),
        sa.Column("message", sa.Text),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False, unique=True),
    )
    op.create_table(
        "lease",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("lease_id", sa.String(40), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.String(40), nullable=False),
        sa.Column("expires_at", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("lease")
    op.drop_table("audit_events")
    op.drop_table("bindings")
