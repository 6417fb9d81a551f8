"""Which code made the history a create re-runs (pure): for each interval in range, the DAG version of its latest
run; how many intervals each version made, how many failed, how many have no run. Evidence from Airflow's
metadata about which code ran, read before a create so the reviewer sees what the backfill overwrites."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.model.airflow import DagRun, DagVersion
from controller.core.rules.coverage import latest_code, latest_runs


@dataclass(frozen=True, slots=True)
class CodeInRange:
    """The code of each interval's latest run in a range: (version, intervals), newest version first; None: runs
    that name no DAG version (queued, or from a release that did not record one)."""

    versions: tuple[tuple[DagVersion | None, int], ...]
    failed: int  # intervals whose latest run failed
    without_run: int | None  # intervals with no run at all (None: the intervals in range are not known)

    def text(self) -> str:
        made = ", ".join(f"{_label(v)}: {_intervals(n)}" for v, n in self.versions) or "no runs yet"
        tail = [f"{self.failed} failed"] if self.failed else []
        tail += [f"{_intervals(self.without_run)} without a run"] if self.without_run else []
        return f"code in range: {made}" + (f"; {', '.join(tail)}" if tail else "")

    def as_json(self) -> dict[str, Any]:
        return {
            "versions": [
                {
                    "version_number": None if v is None else v.number,
                    "bundle_version": None if v is None else v.bundle_version,
                    "intervals": n,
                }
                for v, n in self.versions
            ],
            "failed": self.failed,
            "without_run": self.without_run,
        }


def code_in_range(runs: Sequence[DagRun], intervals: int | None) -> CodeInRange:
    """From every run in a range (any run type): each logical date's latest run by queue time, its latest code."""
    latest = latest_runs(r for r in runs if r.logical_date is not None)  # a partitioned DAG's: partitions, not dates
    made = Counter(latest_code(run) for run in latest.values())
    ordered = sorted(made.items(), key=lambda vn: (vn[0] is None, -(vn[0].number if vn[0] else 0), str(vn[0])))
    failed = sum(1 for run in latest.values() if run.state == "failed")
    return CodeInRange(tuple(ordered), failed, None if intervals is None else max(0, intervals - len(latest)))


def _label(version: DagVersion | None) -> str:
    return "no DAG version recorded" if version is None else version.text()


def _intervals(n: int) -> str:
    return f"{n} interval" + ("" if n == 1 else "s")
