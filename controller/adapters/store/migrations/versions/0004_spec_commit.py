"""Record the spec's own last commit on every audit event (provenance), beside the HEAD commit.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_events") as batch:
        batch.add_column(sa.Column("spec_commit", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_events") as batch:
        batch.drop_column("spec_commit")
