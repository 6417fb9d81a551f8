"""Reconciled commits: each commit a pass reconciled, with the policy it read there (when valid: the last good
policy decides who may lift a stop while the one at HEAD cannot be read, and its guards still pause) and when the
last good pass ended (the dead-man's check). Table `team_scopes`: the policy scope each Airflow login reconciled
with (one store per team: a reconciler whose scope overlaps another login's is refused).

On PostgreSQL also: the audit log is append-only for every role but the table's owner. A trigger refuses UPDATE,
DELETE and TRUNCATE on `audit_events` unless the current role is the owner or a member of it (the role `store
migrate` runs under, or a superuser), whatever was granted, and the grants of UPDATE, DELETE and TRUNCATE on it to
other roles are revoked: the reconciler's role keeps INSERT and SELECT (docs/least-privilege.md, docs/store-roles.sql).
SQLite has no roles: whoever can write its file can rewrite it, and the audit key's MACs are what detect that.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")

# one function for both triggers; `pg_has_role(…, 'MEMBER')` is true for the owner, its members and superusers
APPEND_ONLY = """
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
        IF TG_LEVEL = 'STATEMENT' THEN
            RETURN NULL;
        ELSIF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit_events is append-only: % refused for role %', TG_OP, current_user
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'only the table''s owner (the role backfillctl store migrate runs under) may change audit records';
END
$$
"""
ROW_TRIGGER = (
    "CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events "
    "FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()"
)
TRUNCATE_TRIGGER = (
    "CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events "
    "FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()"
)
# the owner takes back what it (or default privileges) granted on the table to any other role
REVOKE_GRANTS = """
DO $$
DECLARE who text;
BEGIN
    FOR who IN
        SELECT DISTINCT g.grantee FROM information_schema.role_table_grants g
        WHERE g.table_schema = current_schema() AND g.table_name = 'audit_events'
          AND g.privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')
          AND g.grantee <> (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'audit_events'::regclass)
    LOOP
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON audit_events FROM %s',
                       CASE WHEN who = 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(who) END);
    END LOOP;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "reconciled",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("git_commit", sa.String(64)),
        sa.Column("policy_digest", sa.String(80)),
        sa.Column("policy_text", sa.Text),
        sa.Column("first_pass_at", sa.String(40), nullable=False),
        sa.Column("last_pass_at", sa.String(40), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        for statement in (APPEND_ONLY, ROW_TRIGGER, TRUNCATE_TRIGGER, REVOKE_GRANTS):
            op.execute(statement)

    op.create_table(  # the approval gate's decision per file version: verified evidence is reused only for it
        "gate_decisions",
        sa.Column("path", sa.String(500), primary_key=True),
        sa.Column("blob_id", sa.String(64), primary_key=True),
        sa.Column("policy_blob", sa.String(64), primary_key=True),
        sa.Column("verdict", sa.String(20), nullable=False),
        sa.Column("approval", sa.JSON),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("git_commit", sa.String(64)),
        sa.Column("decided_at", sa.String(40), nullable=False),
    )
    # the scope each Airflow login reconciled with; a store refuses overlapping scopes
    op.create_table(
        "team_scopes",
        sa.Column("login", sa.String(200), primary_key=True),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("team_scopes")
    op.drop_table("gate_decisions")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_events_no_truncate ON audit_events")
        op.execute("DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events")
        op.execute("DROP FUNCTION IF EXISTS audit_events_append_only()")
    op.drop_table("reconciled")
