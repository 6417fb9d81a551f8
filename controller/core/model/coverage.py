"""Version coverage as a value (pure): the target DAG version, how many intervals' latest run succeeded on it,
and every interval that did not, with why (`core.rules.coverage` computes it). The binding keeps it as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller.core.model.airflow import DagVersion

DISCLAIMER = (
    "Version coverage is evidence from Airflow's metadata about which code ran, not proof that the outputs are correct."
)


class Gap(StrEnum):
    """Why an interval is not covered."""

    FAILED = "failed"
    NEVER_RAN = "never ran"
    UNFINISHED = "queued or running"
    OTHER_CODE = "other code"
    RERUN_OTHER_CODE = "re-run since on other code"


class TargetSource(StrEnum):
    """Where the target version comes from."""

    AT_END = "the DAG's latest version when the spec ended"
    NOW = "the DAG's latest version now (none was recorded when the spec ended)"


@dataclass(frozen=True, slots=True)
class Missed:
    """An interval whose latest run did not succeed on the target, why, and the code its latest run names."""

    interval: str  # the logical date (UTC, ISO 8601), or the partition key (the date when no run names a key)
    gap: Gap
    code: tuple[DagVersion, ...] = ()  # the versions its latest run ran on (none: no run, or none recorded)

    def text(self) -> str:
        code = ", ".join(v.text() for v in self.code)
        return f"{self.interval} ({self.gap.value}" + (f": {code})" if code else ")")

    def as_json(self) -> dict[str, Any]:
        return {"interval": self.interval, "gap": self.gap.value, "code": [_version_json(v) for v in self.code]}


@dataclass(frozen=True, slots=True)
class Coverage:
    """How many intervals' latest run succeeded on `target`, and every one that did not."""

    target: DagVersion
    source: TargetSource
    intervals: int
    covered: int
    missed: tuple[Missed, ...]

    @property
    def holds(self) -> bool:
        return not self.missed

    def text(self) -> str:
        """One line: `version coverage: 88 of 90 intervals on DAG version 4 (1 failed, 1 other code)`."""
        head = f"version coverage: {self.covered} of {self.intervals} intervals on {self.target.text()}"
        if self.holds:
            return head
        counts: dict[Gap, int] = {}
        for missed in self.missed:
            counts[missed.gap] = counts.get(missed.gap, 0) + 1
        return head + " (" + ", ".join(f"{n} {gap.value}" for gap, n in sorted(counts.items())) + ")"

    def as_json(self) -> dict[str, Any]:
        return {
            "target": _version_json(self.target),
            "target_source": self.source.name.lower(),
            "intervals": self.intervals,
            "covered": self.covered,
            "holds": self.holds,
            "missed": [m.as_json() for m in self.missed],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Coverage:
        """What `as_json` wrote (the binding keeps it: JSON beside the rest, no migration)."""
        return cls(
            target=_version(data["target"]),
            source=TargetSource[str(data["target_source"]).upper()],
            intervals=int(data["intervals"]),
            covered=int(data["covered"]),
            missed=tuple(
                Missed(str(m["interval"]), Gap(m["gap"]), tuple(_version(v) for v in m["code"])) for m in data["missed"]
            ),
        )


def _version_json(version: DagVersion) -> dict[str, Any]:
    return {"version_number": version.number, "bundle_version": version.bundle_version}


def _version(data: Mapping[str, Any]) -> DagVersion:
    bundle = data.get("bundle_version")
    return DagVersion(int(data["version_number"]), None if bundle is None else str(bundle))
