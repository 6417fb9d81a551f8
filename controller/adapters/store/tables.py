"""The store's tables (SQLAlchemy Core). Changes go through a new Alembic migration, never edits."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, Index, Integer, MetaData, String, Table, Text, UniqueConstraint

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

reconciled = Table(  # migration 0009: each commit a pass reconciled, its valid policy, the last good pass
    "reconciled",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("git_commit", String(64)),
    Column("policy_digest", String(80)),
    Column("policy_text", Text),
    Column("first_pass_at", String(40), nullable=False),
    Column("last_pass_at", String(40), nullable=False),
)

team_scopes = Table(  # migration 0009: the scope each Airflow login reconciled with (one store per team)
    "team_scopes",
    metadata,
    Column("login", String(200), primary_key=True),  # the controller's Airflow login (its token's `sub`)
    Column("scope", Text, nullable=False),  # the policy's scope as JSON: {"dags": [...], "tags": [...]}
    Column("recorded_at", String(40), nullable=False),
)

gate_decisions = Table(  # migration 0009: the approval gate's decision per spec or policy file version
    "gate_decisions",
    metadata,
    Column("path", String(500), primary_key=True),
    Column("blob_id", String(64), primary_key=True),
    Column("policy_blob", String(64), primary_key=True),  # the policy the gate judged it by ("": none)
    Column("verdict", String(20), nullable=False),  # approved | refused | unreviewed | held
    Column("approval", JSON),  # an approved change's evidence: the change, its SHAs, the reviews that counted
    Column("reason", Text, nullable=False),
    Column("git_commit", String(64)),  # the branch's commit that carried it
    Column("decided_at", String(40), nullable=False),
)

# migration 0010: each Airflow's completed backfills (immutable once completed), so a create lists only new ones
backfill_history = Table(
    "backfill_history",
    metadata,
    Column("environment", String(300), primary_key=True),  # the Airflow's base URL, without credentials
    Column("backfill_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("dag_id", String(250), nullable=False),
    Column("params", JSON, nullable=False),  # the backfill as Airflow answered it, once completed
    Index("ix_backfill_history_dag", "environment", "dag_id"),
)

backfill_watermarks = Table(  # migration 0010: per Airflow and DAG, the id up to which every backfill is kept
    "backfill_watermarks",
    metadata,
    Column("environment", String(300), primary_key=True),
    Column("dag_id", String(250), primary_key=True),
    Column("watermark", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
    Column("read_at", String(40), nullable=False),
)

# migration 0011: per specs folder, what the last pass found at rest (`rest_summary.py`)
rest_summaries = Table(
    "rest_summaries",
    metadata,
    Column("folder", String(500), primary_key=True),  # the specs folder, repository-relative
    Column("summary", JSON, nullable=False),
    Column("written_at", String(40), nullable=False),
)

store_revisions = Table(  # migration 0011: counters; `finished` is bumped by every write a rest summary depends on
    "store_revisions",
    metadata,
    Column("name", String(40), primary_key=True),
    Column("revision", BigInteger, nullable=False),
)
