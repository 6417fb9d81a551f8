"""Reconciled commits (table `reconciled`): each commit a pass reconciled, the valid policy it read there, and when
the last good pass ended; what the dead-man's check, a lift under an invalid policy and the gate read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, select, update

from controller.adapters.store.database import Clock, Database, stamp, unstamp
from controller.adapters.store.tables import reconciled, team_scopes


@dataclass(frozen=True, slots=True)
class Reconciled:
    """The newest commit a pass reconciled (None: a folder outside git) and what it read there."""

    commit: str | None
    policy_text: str | None  # the policy file as it was, when it was valid (None: none, or invalid)
    first_pass_at: datetime
    last_pass_at: datetime


class ReconciledCommits:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def last(self) -> Reconciled | None:
        with self._db.tx("reading the last reconciled commit") as conn:
            row = conn.execute(select(reconciled).order_by(reconciled.c.id.desc()).limit(1)).mappings().first()
        return None if row is None else _reconciled(row)

    def last_policy(self) -> str | None:
        """The newest valid policy a pass read (None: none recorded)."""
        query = (
            select(reconciled.c.policy_text)
            .where(reconciled.c.policy_text.is_not(None))
            .order_by(reconciled.c.id.desc())
            .limit(1)
        )
        with self._db.tx("reading the last valid policy") as conn:
            return conn.execute(query).scalar()

    def record(self, commit: str | None, policy_text: str | None) -> None:
        """A good pass over `commit`: a new row when the commit or the policy changed, else its time renewed."""
        now = stamp(self._clock())
        digest = None if policy_text is None else hashlib.sha256(policy_text.encode()).hexdigest()
        with self._db.tx("recording the reconciled commit") as conn:
            row = conn.execute(select(reconciled).order_by(reconciled.c.id.desc()).limit(1)).mappings().first()
            if row is not None and (row["git_commit"], row["policy_digest"]) == (commit, digest):
                conn.execute(update(reconciled).where(reconciled.c.id == row["id"]).values(last_pass_at=now))
                return
            values = {"git_commit": commit, "policy_digest": digest, "policy_text": policy_text}
            conn.execute(insert(reconciled).values(**values, first_pass_at=now, last_pass_at=now))


class TeamScopes:
    """Issue 44: the policy scope (as JSON) each Airflow login reconciled with: one store per team."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def all(self) -> dict[str, str]:
        with self._db.tx("reading the recorded scopes") as conn:
            rows = conn.execute(select(team_scopes.c.login, team_scopes.c.scope)).all()
        return {str(login): str(scope) for login, scope in rows}

    def record(self, login: str, scope: str) -> None:
        """This login's scope, replacing what it recorded before (a team's scope may change; another's may not
        overlap it: the caller checks)."""
        now = stamp(self._clock())
        with self._db.tx("recording the reconciler's scope") as conn:
            found = conn.execute(select(team_scopes.c.scope).where(team_scopes.c.login == login)).first()
            if found is None:
                conn.execute(insert(team_scopes).values(login=login, scope=scope, recorded_at=now))
            elif found[0] != scope:
                query = update(team_scopes).where(team_scopes.c.login == login)
                conn.execute(query.values(scope=scope, recorded_at=now))


def _reconciled(row: object) -> Reconciled:
    values = dict(row)  # type: ignore[call-overload]
    return Reconciled(
        values["git_commit"], values["policy_text"], unstamp(values["first_pass_at"]), unstamp(values["last_pass_at"])
    )
