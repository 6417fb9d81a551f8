"""Each downstream system's analysis state, carried from pass to pass (table `analysis_state`, one row a system).

The state is the core's `AnalysisState` as JSON (versioned): a row that cannot be read back is no state, and the
analysis starts from `NEW_STATE` (the caller seeds a lost pause from the audit log).
"""

from __future__ import annotations

import logging

from sqlalchemy import insert, select, update

from controller.adapters.store.database import Clock, Database, stamp
from controller.adapters.store.tables import analysis_state
from controller.core.rules.analysis import AnalysisState

log = logging.getLogger(__name__)


class AnalysisStates:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def all(self) -> dict[str, AnalysisState]:
        """Every system's stored state; an unreadable one is left out (and logged)."""
        with self._db.tx("reading the analysis states") as conn:
            rows = conn.execute(select(analysis_state.c.system, analysis_state.c.state)).all()
        found: dict[str, AnalysisState] = {}
        for system, state in rows:
            try:
                found[system] = AnalysisState.from_json(state if isinstance(state, dict) else {})
            except ValueError as exc:
                log.warning("analysis state of %s is unreadable (%s); it starts afresh", system, exc)
        return found

    def save(self, states: dict[str, AnalysisState]) -> None:
        """Insert or replace the states of these systems, in one transaction."""
        if not states:
            return
        now = stamp(self._clock())
        with self._db.tx("saving the analysis states") as conn:
            known = {r[0] for r in conn.execute(select(analysis_state.c.system)).all()}
            for system, state in sorted(states.items()):
                values = {"state": state.to_json(), "updated_at": now}
                if system in known:
                    conn.execute(update(analysis_state).where(analysis_state.c.system == system).values(**values))
                else:
                    conn.execute(insert(analysis_state).values(system=system, **values))
