"""Each pass's metric analysis: one Prometheus query per downstream system some spec lists, evaluated once.

The verdicts go onto the World (`World.analysis`); the state each system carries between passes is read from the
store and written back in the pass (not by a dry run or a read-only command). A system without stored state
starts from `NEW_STATE`, except that a pause the audit log shows (the newest analysis pause or resume of the
system is a pause) is kept: a lost store must not unpause at once. A URL environment variable that is not set
is inconclusive (with a warning), so the analysis fails closed after its `pause_after` rather than run blind.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from controller.adapters.store import EventFilter, NoStore, Store
from controller.core.audit.chain import AuditRecord
from controller.core.audit.vocabulary import Action, AuditPhase
from controller.core.model.analysis import Analysis, Inconclusive, Observation
from controller.core.model.guards import Guard, GuardKind
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec
from controller.core.rules.analysis import NEW_STATE, AnalysisState, Verdict, evaluate
from controller.errors import ConfigError

if TYPE_CHECKING:  # the Prometheus client loads with the first analysis a pass evaluates (most passes have none)
    from controller.adapters.prometheus import PrometheusClient

log = logging.getLogger(__name__)
SEED_EVENTS = 500  # the newest pause and unpause records read to find a lost state's pause


def analysed_systems(specs: Sequence[BackfillSpec], policy: Policy) -> list[Analysis]:
    """The analyses of the systems some spec lists, by name."""
    listed = {system for spec in specs for system in spec.downstream}
    return sorted(
        (b.analysis for b in policy.downstream if b.analysis is not None and b.name in listed),
        key=lambda a: a.system,
    )


def analysed_names(specs: Sequence[BackfillSpec], policy: Policy) -> list[str]:
    return [a.system for a in analysed_systems(specs, policy)]


class Analyst:
    """Evaluates the analyses of one reconciler's passes (within a pass, one client per URL variable)."""

    def __init__(
        self,
        store: Store,
        env: Mapping[str, str] | None = None,
        connect: Callable[[str, Mapping[str, str]], PrometheusClient] | None = None,
    ) -> None:
        self.store, self.env, self.connect = store, os.environ if env is None else env, connect or _prometheus
        self._clients: dict[str, PrometheusClient] = {}
        self.warned: set[str] = set()
        self.seconds = 0.0  # the last evaluation's wall time (for the pass log and the benchmark)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def verdicts(
        self, specs: Sequence[BackfillSpec], policy: Policy, now: datetime, *, write: bool
    ) -> dict[str, Verdict] | None:
        """Each analysed system's verdict now (None: not evaluated, the store is not there: `plan --no-store`)."""
        analyses = analysed_systems(specs, policy)
        if isinstance(self.store, NoStore) or not analyses:
            return None
        started = time.perf_counter()
        stored = self.store.analysis_states()
        found: dict[str, Verdict] = {}
        states: dict[str, AnalysisState] = {}
        try:
            for config in analyses:
                previous = stored.get(config.system) or self._seeded(config.system)
                verdict, states[config.system] = evaluate(config, previous, self._observe(config), now)
                found[config.system] = verdict
                log.info("analysis %s: %s", config.system, verdict.reason)
        finally:
            self.close()  # a pass's connections end with it (a reconciler may be dropped without closing)
        if write:
            self.store.save_analysis_states(states)
        self.seconds = time.perf_counter() - started
        return found

    def _observe(self, config: Analysis) -> Observation:
        try:
            client = self._clients.get(config.url_env) or self.connect(config.url_env, self.env)
        except ConfigError as exc:
            if config.url_env not in self.warned:  # said once a reconciler, not every pass
                log.warning("analysis of %s: %s; %s — it stays inconclusive", config.system, exc.message, exc.hint)
                self.warned.add(config.url_env)
            return Inconclusive(exc.message)
        self._clients[config.url_env] = client
        return client.query(config.query)

    def _seeded(self, system: str) -> AnalysisState:
        """No stored state: a new one, paused since the newest audited analysis pause if that is the last word."""
        newest = _newest_analysis_event(self.store, system)
        if newest is None or newest.entry.action != Action.PAUSE:
            return NEW_STATE
        log.warning(
            "analysis state of %s was lost; it stays paused since %s (audit seq %d)", system, newest.time, newest.seq
        )
        return replace(NEW_STATE, paused_since=newest.moment)


def _newest_analysis_event(store: Store, system: str) -> AuditRecord | None:
    """The newest pause or unpause intent an analysis of `system` made (its request names the system)."""
    found: list[AuditRecord] = []
    for action in (Action.PAUSE, Action.UNPAUSE):
        for record in store.events(EventFilter(action=action.value), last=SEED_EVENTS):
            if not isinstance(record, AuditRecord) or record.entry.phase != AuditPhase.INTENT:
                continue
            verdicts = (record.entry.request or {}).get("analysis") or []
            if any(isinstance(v, Mapping) and v.get("system") == system for v in verdicts):
                found.append(record)
    return max(found, key=lambda r: r.seq, default=None)


def audit_of(
    guard: Guard | None, spec: BackfillSpec, verdicts: Mapping[str, Verdict] | None
) -> list[dict[str, object]]:
    """What an analysis pause or resume records: the verdicts of the spec's systems (query, value, thresholds,
    the sample's time); empty for any other guard."""
    if guard is None or guard.kind is not GuardKind.ANALYSIS or not verdicts:
        return []
    return [verdicts[s].audit() for s in spec.downstream if s in verdicts]


def _prometheus(url_env: str, env: Mapping[str, str]) -> PrometheusClient:
    """The Prometheus client of a URL variable, imported when a pass first evaluates an analysis (see above)."""
    from controller.adapters.prometheus import client_from_env  # noqa: PLC0415

    return client_from_env(url_env, env)
