"""The state of a pass that is not a binding: each downstream system's metric analysis between passes, the
emergency stops its owners set, and the index of finished spec files by git blob id (a pass reads no file
whose blob it has already settled).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "analysis_state",
        sa.Column("system", sa.String(100), primary_key=True),
        sa.Column("state", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "stops",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("target_kind", sa.String(20), nullable=False),
        sa.Column("target", sa.String(250), nullable=False, index=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("actor_source", sa.String(40), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("expires_at", sa.String(40)),
        sa.Column("lifted_at", sa.String(40), index=True),
        sa.Column("lifted_by", sa.String(200)),
        sa.Column("lift_reason", sa.Text),
    )
    op.create_table(
        "spec_index",
        sa.Column("blob_id", sa.String(64), primary_key=True),
        sa.Column("path", sa.String(500), nullable=False),
        sa.Column("spec_name", sa.String(100), nullable=False, index=True),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("spec_digest", sa.String(80), nullable=False),
        sa.Column("phase", sa.String(32), nullable=False),
        sa.Column("facts", sa.JSON, nullable=True),
        sa.Column("indexed_at", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("spec_index")
    op.drop_table("stops")
    op.drop_table("analysis_state")
