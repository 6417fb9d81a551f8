"""The stop workflow a `source: workflow` stop must prove it ran in (pure): the policy's `stop_workflow`, matched
against a GitHub Actions OIDC token's claims (`core.rules.oidc`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
AUDIENCE = "backfillctl"  # the audience the stop workflow asks its token for
WORKFLOWS = ".github/workflows/"


@dataclass(frozen=True, slots=True)
class StopWorkflow:
    repository: str  # OWNER/NAME: the token's `repository` claim (the specs repository whose run stops)
    workflow: str  # the workflow the job runs: OWNER/NAME/.github/workflows/FILE.yml, or .github/… in `repository`
    ref: str | None = None  # the run's `ref` claim (e.g. refs/heads/main); None: any
    issuer: str = GITHUB_ISSUER  # its keys are read from ISSUER/.well-known/jwks

    @property
    def job_workflow(self) -> str:
        """What the token's `job_workflow_ref` holds before its `@`: the called (reusable) workflow's path."""
        return f"{self.repository}/{self.workflow}" if self.workflow.startswith(WORKFLOWS) else self.workflow


def parse_stop_workflow(raw: dict[str, Any] | None) -> StopWorkflow | None:
    """The policy's `stop_workflow` (the schema checked its shape); None when it has none."""
    if raw is None:
        return None
    return StopWorkflow(raw["repository"], raw["workflow"], raw.get("ref"), raw.get("issuer", GITHUB_ISSUER))
