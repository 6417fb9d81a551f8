"""Backfill history: each Airflow's completed backfills per DAG (a completed backfill never changes) and, per
Airflow and DAG, the watermark up to which every backfill is kept, so a create lists only the backfills newer than
it (newest first) and its cost does not grow with the DAG's history. A lost store rebuilds them on its first pass.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "backfill_history",
        sa.Column("environment", sa.String(300), primary_key=True),
        sa.Column("backfill_id", _ID, primary_key=True, autoincrement=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
    )
    op.create_index("ix_backfill_history_dag", "backfill_history", ["environment", "dag_id"])
    op.create_table(
        "backfill_watermarks",
        sa.Column("environment", sa.String(300), primary_key=True),
        sa.Column("dag_id", sa.String(250), primary_key=True),
        sa.Column("watermark", _ID, nullable=False),
        sa.Column("read_at", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("backfill_watermarks")
    op.drop_index("ix_backfill_history_dag", table_name="backfill_history")
    op.drop_table("backfill_history")
