"""Text of a new spec for `backfillctl new` (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from controller.core.spec import ReprocessBehavior, parse_date


@dataclass(frozen=True, slots=True)
class NewSpec:
    name: str
    dag_id: str
    from_date: str
    to_date: str
    reprocess: ReprocessBehavior
    max_active_runs: int
    requested_by: str
    ticket: str
    approvers: tuple[str, ...]
    expected_runs: int | None = None


def daily_upper_bound(from_date: str, to_date: str) -> int:
    """Days in the inclusive range: the run count of a daily DAG, an upper bound for slower ones."""
    return max(1, (parse_date(to_date) - parse_date(from_date)).days + 1)


def scaffold(new: NewSpec) -> str:
    expected = new.expected_runs or daily_upper_bound(new.from_date, new.to_date)
    approvers = ", ".join(new.approvers)
    return f"""\
# Backfill spec: validate with `backfillctl validate`, preview with `backfillctl plan`.
version: 1
name: {new.name}                 # must equal the file name
dag_id: {new.dag_id}
from_date: {json.dumps(new.from_date)}           # inclusive; a date means 00:00 UTC
to_date: {json.dumps(new.to_date)}             # inclusive
reprocess_behavior: {new.reprocess.value}        # none | failed | completed: which existing runs to re-run
max_active_runs: {new.max_active_runs}             # runs of this backfill at once
run_backwards: false
# dag_run_conf: {{}}            # conf for every run, checked against the DAG's params
expected_runs: {expected}             # reviewed upper bound (daily count); `backfillctl plan` shows Airflow's
ticket: {new.ticket}                # TODO: the change ticket that authorises this backfill
reason: "TODO: explain why this backfill is needed"   # TODO: at least 10 characters, for reviewers
requested_by: {new.requested_by}
approvers: [{approvers}]   # TODO: who must approve the pull request (not requested_by)
# downstream: []             # systems that will feel the load
"""
