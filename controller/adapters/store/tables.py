"""The store's tables (SQLAlchemy Core). Changes go through a new Alembic migration, never edits."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, Integer, MetaData, String, Table, Text, UniqueConstraint

metadata = MetaData()

bindings = Table(
    "bindings",
    metadata,
    Column("spec_name", String(100), primary_key=True),
    Column("airflow_url", String(500), nullable=False),
    Column("dag_id", String(250), nullable=False),
    Column("backfill_id", Integer, nullable=True),
    Column("spec_digest", String(80), nullable=False),
    Column("git_commit", String(64), nullable=True),
    Column("phase", String(32), nullable=False),
    Column("run_counts", JSON, nullable=True),
    Column("applied_state", String(20), nullable=False, server_default="active"),
    Column("detail", JSON, nullable=True),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
)

audit_events = Table(
    "audit_events",
    metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("time", String(40), nullable=False),
    Column("actor", String(200), nullable=False),
    Column("controller_version", String(40), nullable=False),
    Column("git_commit", String(64)),
    Column("spec_commit", String(64)),
    Column("spec_name", String(100), index=True),
    Column("spec_path", String(500)),
    Column("spec_digest", String(80)),
    Column("dag_id", String(250), index=True),
    Column("backfill_id", Integer),
    Column("action", String(40), nullable=False, index=True),
    Column("phase", String(20), nullable=False),
    Column("outcome", String(60)),
    Column("request", JSON),
    Column("response", JSON),
    Column("message", Text),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False, unique=True),
    Column("mac", String(64)),  # migration 0006: HMAC-SHA256(key, hash) in a keyed chain
)

lease = Table(
    "lease",
    metadata,
    Column("name", String(40), primary_key=True),
    Column("lease_id", String(40), nullable=False),
    Column("holder", String(200), nullable=False),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("acquired_at", String(40), nullable=False),
    Column("expires_at", String(40), nullable=False),
)

notifications = Table(  # the outbox (migration 0005): one row per (audit record, receiver), delivered at least once
    "notifications",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("key", String(200), nullable=False, unique=True),
    Column("audit_seq", BigInteger().with_variant(Integer, "sqlite"), nullable=False, index=True),
    Column("receiver", String(100), nullable=False),
    Column("event", String(40), nullable=False),
    Column("format", String(20), nullable=False),
    Column("facts", JSON, nullable=False),
    Column("status", String(20), nullable=False, index=True),  # pending | delivered
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", String(40), nullable=False),
    Column("last_error", Text),
    Column("created_at", String(40), nullable=False),
    Column("delivered_at", String(40)),
)

# migration 0007: what a pass keeps besides bindings
analysis_state = Table(  # each downstream system's metric analysis, carried from pass to pass (JSON, versioned)
    "analysis_state",
    metadata,
    Column("system", String(100), primary_key=True),
    Column("state", JSON, nullable=False),
    Column("updated_at", String(40), nullable=False),
)

stops = Table(  # emergency stops: `target_kind` spec | downstream; lifted by an owner, an expiry or a resume
    "stops",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("target_kind", String(20), nullable=False),
    Column("target", String(250), nullable=False, index=True),
    Column("reason", Text, nullable=False),
    Column("actor", String(200), nullable=False),
    Column("actor_source", String(40), nullable=False),  # cli (the store credentials' word) | workflow (GitHub's)
    Column("created_at", String(40), nullable=False),
    Column("expires_at", String(40)),
    Column("lifted_at", String(40), index=True),
    Column("lifted_by", String(200)),
    Column("lift_reason", Text),
)

spec_index = Table(  # spec files by git blob id: their provenance; a finished one, unchanged, is not read again
    "spec_index",
    metadata,
    Column("blob_id", String(64), primary_key=True),
    Column("path", String(500), nullable=False),
    Column("spec_name", String(100), nullable=False, index=True),
    Column("dag_id", String(250), nullable=False),
    Column("spec_digest", String(80), nullable=False),
    Column("phase", String(32), nullable=False),
    Column("facts", JSON, nullable=True),
    Column("indexed_at", String(40), nullable=False),
)

stages = Table(  # a spec's rehearsal, verification and publish runs, one row per (spec, environment, stage, key)
    "stages",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("spec_name", String(100), nullable=False, index=True),
    Column("environment", String(64), nullable=False),
    Column("stage", String(20), nullable=False),
    Column("stage_key", String(64), nullable=False),
    Column("state", String(20), nullable=False),
    Column("started_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("backfill_ids", JSON, nullable=False),
    Column("run_id", String(250)),
    Column("triggered_at", String(40)),
    Column("reason", Text),
    Column("metrics", JSON),
    Column("runs", JSON),
    UniqueConstraint("spec_name", "environment", "stage", "stage_key", name="uq_stages_key"),
)
