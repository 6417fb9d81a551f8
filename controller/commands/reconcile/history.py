"""A DAG's backfill history, read once and kept: a spec without a backfill may adopt one from any time (a renamed
spec, a lost store), and Airflow's backfill listing has no date or id filter, so without the store a create on a
long-lived DAG would page the DAG's whole history. The store keeps each Airflow's completed backfills per DAG (a
completed backfill never changes) and a watermark: every backfill up to it is kept. A read lists newest first and
stops at the watermark (`Backfills.newer_than`), so its cost depends on what is new, not on the history.

What is kept is checked against each read: the page that reaches the watermark must answer the kept backfills
as they were. One that answers other parameters, or is missing, is an Airflow whose database was reset or
restored: that Airflow's history is dropped, read again whole, and the drop is audited.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import NoStore, Store
from controller.adapters.store.history import KnownHistory
from controller.core.audit.chain import controller_event
from controller.core.audit.vocabulary import Action, Outcome
from controller.core.model.airflow import Backfill

log = logging.getLogger(__name__)


def environment_of(url: str) -> str:
    """The Airflow's identity in the store: its base URL without credentials, query or fragment (never a secret)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme.lower()}://{host}{port}{parts.path.rstrip('/')}"


@dataclass(frozen=True, slots=True)
class Learned:
    """What one read taught of a DAG: its watermark and its completed backfills up to it."""

    watermark: int
    completed: tuple[Backfill, ...]
    moved: bool  # the watermark is not the kept one (or nothing was kept): worth a write


class HistoryRead:
    """One observation's reads: the kept history of its DAGs (read before, by the caller's thread) and what each
    listing taught (written after, by the caller's thread: the store is never written from the pool)."""

    def __init__(self, client: AirflowClient, known: Mapping[str, KnownHistory]) -> None:
        self._client, self._known = client, known
        self._lock = threading.Lock()
        self.learned: dict[str, Learned] = {}
        self.resets: list[str] = []  # why a kept history was found untrue, one line each

    def backfills(self, dag_id: str) -> list[Backfill]:
        """The DAG's backfills, oldest first: the kept ones and those newer than the watermark."""
        known = self._known.get(dag_id)
        if known is None:  # never read (a new DAG, a lost store): the whole history, once
            return self._learn(dag_id, self._client.list_backfills(dag_id), None)
        listing = self._client.backfills_newer_than(dag_id, known.watermark)
        if not listing.ordered:
            log.warning(
                "Airflow ignored order_by=-id on the backfills of DAG %s: its whole history was read, not only the "
                "backfills newer than #%d",
                dag_id,
                known.watermark,
            )
        why = disagreement(known, listing.backfills)
        if why is not None:
            with self._lock:
                self.resets.append(f"DAG {dag_id}: {why}")
            found = sorted(listing.backfills, key=_id) if not listing.ordered else self._client.list_backfills(dag_id)
            return self._learn(dag_id, found, None)
        newer = sorted((b for b in listing.backfills if b.id > known.watermark), key=_id)
        return self._learn(dag_id, [*known.backfills, *newer], known)

    def _learn(self, dag_id: str, found: list[Backfill], known: KnownHistory | None) -> list[Backfill]:
        watermark = watermark_of(found)
        completed = tuple(b for b in found if b.id <= watermark)
        moved = known is None or watermark != known.watermark
        with self._lock:
            self.learned[dag_id] = Learned(watermark, completed, moved)
        return found


def watermark_of(backfills: Sequence[Backfill]) -> int:
    """The highest id up to which every backfill is completed (0: none): Airflow refuses a create while one is
    active, so an active backfill is the newest and everything below it is final."""
    active = [b.id for b in backfills if b.active]
    below = min(active) if active else None
    return max((b.id for b in backfills if not b.active and (below is None or b.id < below)), default=0)


def disagreement(known: KnownHistory, listed: Sequence[Backfill]) -> str | None:
    """Why the listing's backfills at or below the watermark are not the kept ones (None: they are): the watermark's
    own backfill is missing, or one answers other parameters, or one was never kept."""
    kept = {b.id: b for b in known.backfills}
    below = {b.id: replace(b, creator=None) for b in listed if b.id <= known.watermark}
    if known.watermark and known.watermark not in below:
        return f"backfill #{known.watermark}, the newest kept, is not in Airflow's listing"
    for backfill_id, backfill in sorted(below.items(), reverse=True):
        if backfill_id not in kept:
            return f"backfill #{backfill_id} is listed but was never kept (every backfill up to #{known.watermark} was)"
        if kept[backfill_id] != backfill:
            return f"backfill #{backfill_id} answers other parameters than the ones kept"
    return None


class KeptHistory:
    """The store's backfill history of one Airflow: read before an observation, written after it. A read-only
    store (`plan`, `status`) is read, never written."""

    def __init__(self, store: Store, airflow_url: str, actor: str) -> None:
        self._store, self.environment, self._actor = store, environment_of(airflow_url), actor

    def read(self, client: AirflowClient, dag_ids: Collection[str]) -> HistoryRead:
        return HistoryRead(client, self._store.backfill_history.known(self.environment, dag_ids))

    def write(self, read: HistoryRead) -> None:
        """What the read taught: a reset drops this Airflow's history first (audited), then the DAGs' watermarks
        and completed backfills are kept."""
        if self._store.read_only:
            return
        kept = self._store.backfill_history
        if read.resets:
            dropped = kept.forget(self.environment)
            message = (
                f"Airflow {self.environment} answered its backfill history differently from what was kept (its "
                f"database was reset or restored): {'; '.join(read.resets)}; dropped {dropped} kept backfill(s), "
                "read again whole"
            )
            self._store.append(controller_event(Action.RECONCILE, self._actor, Outcome.HISTORY_RESET, message))
        for dag_id, learned in sorted(read.learned.items()):
            if learned.moved or read.resets:
                kept.keep(self.environment, dag_id, learned.watermark, learned.completed)


def kept_history(store: Store, airflow_url: str, actor: str) -> KeptHistory | None:
    """The store's backfill history, or None where there is no store (`plan --no-store`)."""
    return None if isinstance(store, NoStore) else KeptHistory(store, airflow_url, actor)


def _id(backfill: Backfill) -> int:
    return backfill.id
