"""The dead-man's check (pure): scheduled reconciles can stop happening without a word (GitHub delays or drops
scheduled runs at load peaks and disables them after 60 days without activity in public repositories), so every
view says when the last good pass is older than two of the intervals it is expected at."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

OVERDUE_AFTER = 2  # intervals without a good pass before the views say so


@dataclass(frozen=True, slots=True)
class Liveness:
    last_good_pass: datetime | None  # None: no pass recorded yet
    expect_every: timedelta | None  # None: no interval declared (policy `liveness.expect_every`, `--expect-every`)
    now: datetime

    @property
    def overdue(self) -> bool:
        if self.expect_every is None:
            return False
        return self.last_good_pass is None or self.now - self.last_good_pass > OVERDUE_AFTER * self.expect_every

    def warning(self) -> str | None:
        """What `status`, the page and `/healthz` say when no good pass came for two intervals (None: all is well)."""
        if not self.overdue or self.expect_every is None:
            return None
        every = span_text(self.expect_every)
        if self.last_good_pass is None:
            return f"no reconcile pass has been recorded, and one is expected every {every}"
        ago = span_text(self.now - self.last_good_pass)
        return (
            f"the last good reconcile pass was {ago} ago ({self.last_good_pass.isoformat()[:19]}Z), and one is "
            f"expected every {every}: check that scheduled reconciles still run (GitHub delays, drops and disables "
            "scheduled workflows) or that the --watch process is alive"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "last_good_pass": None if self.last_good_pass is None else self.last_good_pass.isoformat(),
            "expect_every_seconds": None if self.expect_every is None else int(self.expect_every.total_seconds()),
            "overdue": self.overdue,
        }


def span_text(span: timedelta) -> str:
    """A duration the way people say it: `45m`, `3h 10m`, `2d 4h`."""
    minutes = int(span.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [
        f"{days}d" if days else "",
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes or not (days or hours) else "",
    ]
    return " ".join(p for p in parts if p)
