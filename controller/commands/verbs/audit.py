"""`backfillctl audit …` and `backfillctl store …`: open the store, read or check the chain, unlock.

Reading (audit show/verify/export, report, offline status) opens the store read-only: a missing store
is an error, never an empty success, and nothing is created or migrated.

A row that no backfillctl wrote is skipped by show and export, each with an error on stderr, and the command
exits 1: stdout stays a stream of genuine records (JSONL feeds log platforms), the error says which seq and
what is wrong, and nothing is green. `audit verify` names it as the first bad record.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from controller.adapters import files
from controller.adapters.store.audit_log import EventFilter
from controller.adapters.store.lease import Lease
from controller.commands.runtime.session import open_store
from controller.commands.runtime.settings import Settings
from controller.core.audit.chain import AuditRecord, Unreadable, VerifyResult, controller_event
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.binding import Binding
from controller.core.model.stages import StageRecord
from controller.core.model.stops import StopHistory
from controller.errors import StoreError, UsageError


def show(
    settings: Settings, where: EventFilter, *, first: int | None = None, last: int | None = None
) -> Iterator[AuditRecord | Unreadable]:
    """The events that match, oldest first: all, the `first` N or the `last` N."""
    with open_store(settings, read_only=True) as store:
        yield from itertools.islice(store.events(where, last=last), first)


@dataclass(frozen=True, slots=True)
class Printed:
    shown: int  # records written on stdout
    skipped: int  # unreadable records, each an error on stderr


def print_events(
    settings: Settings,
    where: EventFilter,
    line: Callable[[AuditRecord], str],
    *,
    first: int | None = None,
    last: int | None = None,
) -> Printed:
    """Write each readable record as a line on stdout and each unreadable one as an error on stderr."""
    shown = skipped = 0
    for record in show(settings, where, first=first, last=last):
        if isinstance(record, Unreadable):
            sys.stdout.flush()  # keep the error next to where the record belongs on a terminal
            sys.stderr.write(f"error: {record.describe()}; skipped (run `backfillctl audit verify`)\n")
            skipped += 1
        else:
            sys.stdout.write(line(record) + "\n")
            shown += 1
    sys.stdout.flush()
    if skipped:
        sys.stderr.write(
            f"error: {skipped} unreadable audit record(s) skipped: the store was edited outside backfillctl\n"
        )
    return Printed(shown, skipped)


def spec_file_note(settings: Settings, name: str, printed: Printed, *, narrowed: bool = False) -> str | None:
    """What `audit show --spec NAME` says of a spec whose file is not in the specs folder: its records are the
    store's (a finished spec tidied away keeps them); with no record either (and no other filter that could
    explain it: `narrowed`), the name is a mistake."""
    if name in files.names_in_tree(settings.specs_dir):
        return None
    if printed.shown or printed.skipped:
        return (
            f"note: {name}'s file is gone from {files.display(settings.specs_dir)}: these are the store's records "
            f"(`backfillctl report {name}` shows its change record)"
        )
    if narrowed:
        return None
    raise UsageError(
        f"audit show --spec {name}: no spec named {name!r} under {files.display(settings.specs_dir)}, and the store "
        "has no record of it",
        hint="`backfillctl status` lists the specs",
    )


def verify(settings: Settings, expect_head: str | None) -> VerifyResult:
    with open_store(settings, read_only=True, previous_keys=True) as store:
        return store.verify(expect_head)


def adopt_key(settings: Settings, expect_head: str | None) -> AuditRecord:
    """Key an unkeyed chain with BACKFILLCTL_AUDIT_KEY; the adoption record names who did it."""
    with open_store(settings) as store:
        return store.adopt_audit_key(settings.actor, expect_head)


def rotate_key(settings: Settings) -> AuditRecord:
    """Rotate the chain from a key in BACKFILLCTL_AUDIT_KEYS_PREVIOUS to BACKFILLCTL_AUDIT_KEY; audited."""
    with open_store(settings, previous_keys=True) as store:
        return store.rotate_audit_key(settings.actor)


def migrate(settings: Settings) -> tuple[str | None, str]:
    with open_store(settings, migrate=False) as store:
        return store.migrate()


def unlock(settings: Settings, lease_id: str) -> Lease:
    """Release a stuck lease by its exact id, and audit who did it."""
    with open_store(settings) as store:
        released = store.unlock(lease_id)
        message = f"released the lease of {released.describe()}"
        store.append(
            controller_event(Action.UNLOCK, settings.actor, Outcome.RELEASED, message, phase=AuditPhase.OUTCOME)
        )
        return released


@dataclass(frozen=True, slots=True)
class SpecRecord:
    """What the store keeps of one spec: its binding, its audit events, its stages and the stops that held it."""

    binding: Binding | None
    events: list[AuditRecord]
    stages: tuple[StageRecord, ...]
    stops: tuple[StopHistory, ...]


def spec_record(settings: Settings, name: str, downstream: Sequence[str] = ()) -> SpecRecord:
    """The stored binding, the audit events, the stages and the stops (`downstream`: the systems it lists)."""
    with open_store(settings, read_only=True) as store:
        events = [_readable(record) for record in store.events(EventFilter(spec=name))]
        return SpecRecord(store.binding(name), events, store.stages_of(name), store.stop_history(name, downstream))


def _readable(record: AuditRecord | Unreadable) -> AuditRecord:
    """A change record with a hole would mislead: an unreadable event stops the report with what it is."""
    if isinstance(record, Unreadable):
        raise StoreError(record.describe(), hint="run `backfillctl audit verify` to check the whole chain")
    return record


def stored_bindings(settings: Settings) -> dict[str, Binding]:
    with open_store(settings, read_only=True) as store:
        return store.bindings()
