"""Stages: a spec's rehearsal in another environment, its verification runs and its publish run, each keyed by
what it proves (a new rehearsal key is a new row: the old outcome stays for the change record).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "stages",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("spec_name", sa.String(100), nullable=False, index=True),
        sa.Column("environment", sa.String(64), nullable=False),
        sa.Column("stage", sa.String(20), nullable=False),
        sa.Column("stage_key", sa.String(64), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
        sa.Column("backfill_ids", sa.JSON, nullable=False),
        sa.Column("run_id", sa.String(250)),
        sa.Column("triggered_at", sa.String(40)),
        sa.Column("reason", sa.Text),
        sa.Column("metrics", sa.JSON),
        sa.Column("runs", sa.JSON),
        sa.UniqueConstraint("spec_name", "environment", "stage", "stage_key", name="uq_stages_key"),
    )


def downgrade() -> None:
    op.drop_table("stages")
