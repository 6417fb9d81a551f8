"""Rest summary: what a pass over a specs folder found at rest (the finished specs it counts, not reads), kept per
folder, and the store's finished revision, which every write of a finished binding or of the spec index bumps; a
pass whose folder's tree and revision are the summary's reads only the live specs.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rest_summaries",
        sa.Column("folder", sa.String(500), primary_key=True),
        sa.Column("summary", sa.JSON, nullable=False),
        sa.Column("written_at", sa.String(40), nullable=False),
    )
    revisions = op.create_table(
        "store_revisions",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("revision", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(revisions, [{"name": "finished", "revision": 0}])


def downgrade() -> None:
    op.drop_table("store_revisions")
    op.drop_table("rest_summaries")
