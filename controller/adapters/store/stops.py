"""Emergency stops (table `stops`): recorded, listed, lifted; and the fence every create or unpause intent runs.

A stop names a spec or a downstream system. `fence` runs inside the intent's append transaction (beside the
lease fence): while an unlifted, unexpired stop names the spec or one of its systems, the intent is refused,
so no create, chunk or unpause slips through a pass that planned before the stop was recorded.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, or_, select, update

from controller.adapters.store.database import Clock, Database, stamp, unstamp
from controller.adapters.store.tables import audit_events, stops
from controller.core.model.stops import EmergencyStop, EmergencyStopKind, StopHistory, StopSource
from controller.errors import Stopped, StoreError, UsageError

HELD_ACTIONS = ("create", "unpause")  # what a stop refuses; pauses and cancels only ever reduce the load


class Stops:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def add(
        self,
        kind: EmergencyStopKind,
        target: str,
        reason: str,
        actor: str,
        *,
        source: StopSource,
        expires_at: datetime | None = None,
    ) -> EmergencyStop:
        now = self._clock()
        values = {
            "target_kind": kind.value,
            "target": target,
            "reason": reason,
            "actor": actor,
            "actor_source": source.value,
            "created_at": stamp(now),
            "expires_at": None if expires_at is None else stamp(expires_at),
        }
        with self._db.tx(f"recording a stop of {kind.value} {target}") as conn:
            new_id = conn.execute(insert(stops).values(**values).returning(stops.c.id)).scalar_one()
        return _stop({**values, "id": new_id})

    def active(self) -> tuple[EmergencyStop, ...]:
        """Every stop not lifted yet (an expired one too, until a pass lifts it), oldest first."""
        with self._db.tx("reading stops") as conn:
            rows = conn.execute(select(stops).where(stops.c.lifted_at.is_(None)).order_by(stops.c.id)).mappings()
            return tuple(_stop(row) for row in rows)

    def lift(self, stop_id: int, by: str, reason: str) -> EmergencyStop:
        with self._db.tx(f"lifting stop #{stop_id}") as conn:
            row = conn.execute(select(stops).where(stops.c.id == stop_id)).mappings().first()
            if row is None or row["lifted_at"] is not None:
                state = "does not exist" if row is None else f"was lifted at {row['lifted_at']} by {row['lifted_by']}"
                raise UsageError(f"stop #{stop_id} {state}", hint="`backfillctl stop list` shows the stops in force")
            conn.execute(
                update(stops)
                .where(stops.c.id == stop_id)
                .values(lifted_at=stamp(self._clock()), lifted_by=by, lift_reason=reason)
            )
            return _stop(row)

    def history(self, name: str, downstream: Sequence[str]) -> tuple[StopHistory, ...]:
        """Every stop that held the spec `name` (listing `downstream`), lifted or not, oldest first."""
        named = (stops.c.target_kind == EmergencyStopKind.SPEC.value) & (stops.c.target == name)
        systems = (stops.c.target_kind == EmergencyStopKind.DOWNSTREAM.value) & stops.c.target.in_(list(downstream))
        everything = stops.c.target_kind == EmergencyStopKind.ALL.value
        query = select(stops).where(or_(named, systems, everything)).order_by(stops.c.id)
        with self._db.tx("reading a spec's stops") as conn:
            rows = conn.execute(query).mappings().all()
        return tuple(
            StopHistory(
                _stop(row),
                None if row["lifted_at"] is None else unstamp(row["lifted_at"]),
                row["lifted_by"],
                row["lift_reason"],
            )
            for row in rows
        )

    def stop_paused(self, among: Collection[int]) -> frozenset[int]:
        """Of the backfills `among`, those whose latest pause/unpause intent was a stop's pause (its message starts
        `stop #`); nothing is read when `among` is empty."""
        if not among:
            return frozenset()
        query = (
            select(audit_events.c.backfill_id, audit_events.c.action, audit_events.c.message)
            .where(
                audit_events.c.action.in_(("pause", "unpause")),
                audit_events.c.phase == "intent",
                audit_events.c.backfill_id.in_(sorted(among)),
            )
            .order_by(audit_events.c.seq)
        )
        latest: dict[int, bool] = {}
        with self._db.tx("reading stop pauses") as conn:
            for backfill_id, action, message in conn.execute(query):
                if backfill_id is not None:
                    latest[backfill_id] = action == "pause" and (message or "").startswith("stop #")
        return frozenset(b for b, by_stop in latest.items() if by_stop)

    def fence(self, conn: Connection, action: str, spec_name: str | None, downstream: Sequence[str]) -> None:
        """Inside an intent's transaction: refuse a create or unpause that a stop in force holds."""
        if action not in HELD_ACTIONS or spec_name is None:
            return
        named = (stops.c.target_kind == EmergencyStopKind.SPEC.value) & (stops.c.target == spec_name)
        systems = (stops.c.target_kind == EmergencyStopKind.DOWNSTREAM.value) & stops.c.target.in_(list(downstream))
        everything = stops.c.target_kind == EmergencyStopKind.ALL.value
        query = select(stops).where(stops.c.lifted_at.is_(None), or_(named, systems, everything)).order_by(stops.c.id)
        rows = conn.execute(query).mappings().all()
        now = self._clock() if any(r["expires_at"] is not None for r in rows) else None  # the clock only if needed
        row = next((r for r in rows if r["expires_at"] is None or (now and unstamp(r["expires_at"]) > now)), None)
        if row is not None:
            stop = _stop(row)
            raise Stopped(
                f"{action} of {spec_name} refused: {stop.held}",
                hint=f"`backfillctl stop lift {stop.target}` (an owner), or wait for its expiry",
            )


def _stop(row: Any) -> EmergencyStop:
    try:
        return EmergencyStop(
            id=int(row["id"]),
            kind=EmergencyStopKind(row["target_kind"]),
            target=row["target"],
            reason=row["reason"],
            actor=row["actor"],
            source=StopSource(row["actor_source"]),
            created_at=unstamp(row["created_at"]),
            expires_at=None if row["expires_at"] is None else unstamp(row["expires_at"]),
        )
    except ValueError as exc:
        raise StoreError(f"stop #{row['id']} cannot be read: {exc}") from exc
