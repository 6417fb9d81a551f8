"""The stop verbs on SQLite and PostgreSQL, and the fence: an intent for a stopped target is refused in its
transaction (nothing is appended), a pause is not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller import __version__
from controller.adapters.store import Store
from controller.core.audit.chain import AuditEntry
from controller.core.model.stops import EmergencyStopKind, StopSource
from controller.errors import Stopped, UsageError

T = datetime(2026, 11, 29, 12, tzinfo=UTC)


def intent(action: str, spec: str = "orders-fix") -> AuditEntry:
    return AuditEntry(action=action, phase="intent", actor="ci", controller_version=__version__, spec_name=spec)


def test_add_list_and_lift(store_url: str) -> None:
    with Store(store_url, clock=lambda: T) as store:
        first = store.add_stop(EmergencyStopKind.DOWNSTREAM, "warehouse", "CPU at 95%", "oncall", source=StopSource.CLI)
        later = store.add_stop(
            EmergencyStopKind.SPEC,
            "orders-fix",
            "bad data",
            "gh-user",
            source=StopSource.WORKFLOW,
            expires_at=T + timedelta(hours=4),
        )
        assert [(s.id, s.kind, s.target, s.actor, s.source, s.expires_at) for s in store.stops()] == [
            (first.id, EmergencyStopKind.DOWNSTREAM, "warehouse", "oncall", StopSource.CLI, None),
            (later.id, EmergencyStopKind.SPEC, "orders-fix", "gh-user", StopSource.WORKFLOW, T + timedelta(hours=4)),
        ]
        store.lift_stop(first.id, "warehouse-oncall", "load is down")
        assert [s.id for s in store.stops()] == [later.id]
        with pytest.raises(UsageError, match=f"stop #{first.id} was lifted at .* by warehouse-oncall"):
            store.lift_stop(first.id, "x", "again")


def test_an_intent_for_a_stopped_target_is_refused_in_its_transaction(store_url: str) -> None:
    with Store(store_url, clock=lambda: T) as store:
        stop = store.add_stop(EmergencyStopKind.DOWNSTREAM, "warehouse", "CPU at 95%", "oncall", source=StopSource.CLI)
        before = store.audit_head_seq()
        for action in ("create", "unpause"):
            with pytest.raises(Stopped, match=f"{action} of orders-fix refused: stop #{stop.id}: stopped by oncall"):
                store.append(intent(action), downstream=("warehouse",))
        assert store.audit_head_seq() == before  # nothing was appended
        store.append(intent("pause"), downstream=("warehouse",))  # a pause only reduces the load
        store.append(intent("create", "other"), downstream=("lake",))
        assert store.audit_head_seq() == before + 2
        store.lift_stop(stop.id, "oncall", "ok")
        store.append(intent("create"), downstream=("warehouse",))


def test_an_expired_stop_no_longer_refuses(store_url: str) -> None:
    with Store(store_url, clock=lambda: T) as store:
        store.add_stop(
            EmergencyStopKind.SPEC, "orders-fix", "r", "a", source=StopSource.CLI, expires_at=T - timedelta(seconds=1)
        )
        store.append(intent("create"))


def test_a_stop_of_everything_refuses_every_create_and_unpause_and_no_pause(store_url: str) -> None:
    with Store(store_url, clock=lambda: T) as store:
        stop = store.add_stop(EmergencyStopKind.ALL, "everything", "incident 42", "oncall", source=StopSource.CLI)
        before = store.audit_head_seq()
        for action, spec, systems in (("create", "a", ()), ("unpause", "b", ("lake",))):
            with pytest.raises(Stopped, match=f"{action} of {spec} refused: stop #{stop.id}: stopped by oncall"):
                store.append(intent(action, spec), downstream=systems)
        store.append(intent("pause", "a"))
        assert store.audit_head_seq() == before + 1
        store.lift_stop(stop.id, "owner", "incident over")
        store.append(intent("create", "a"))


def test_what_a_stop_paused_is_read_only_for_the_backfills_asked(store_url: str) -> None:
    def pause(action: str, backfill_id: int, message: str) -> None:
        entry = AuditEntry(
            action=action,
            phase="intent",
            actor="ci",
            controller_version=__version__,
            spec_name=f"s{backfill_id}",
            backfill_id=backfill_id,
            message=message,
        )
        store.append(entry)

    with Store(store_url, clock=lambda: T) as store:
        pause("pause", 1, "stop #3: stopped by oncall (cli): CPU at 95%")
        pause("pause", 2, "stop #3: stopped by oncall (cli): CPU at 95%")
        pause("unpause", 2, "stop #3 lifted")  # its latest pause/unpause is no stop's pause
        pause("pause", 4, "paused by window until 20:00 Europe/Berlin")  # a guard's pause is no stop's
        pause("pause", 5, "stop #3: stopped by oncall (cli): CPU at 95%")
        assert store.stop_paused({1, 2, 3, 4}) == frozenset({1})  # 5 was not asked
        assert store.stop_paused({5}) == frozenset({5})
        assert store.stop_paused(()) == frozenset()
