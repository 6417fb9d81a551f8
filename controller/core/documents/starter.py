"""The files of a new specs repository for `backfillctl init` (pure: texts only; commands/init.py writes them).

Every file is a template with three tokens: the repository of backfillctl (its reusable workflows and the
pre-commit hook), the ref pinning both, and the GitHub environment holding the reconcile job's secrets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# not a real repository: `init` says so until --workflows-repo names where backfillctl lives
PLACEHOLDER_REPO = "YOUR-ORG/airflow-backfill-controller"
DEFAULT_ENVIRONMENT = "backfill-production"
REPO_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# a tag, branch or commit SHA as git allows it, without what YAML or a shell would read otherwise (the files
# quote it: a SHA of digits only, or `1.0`, is a number to YAML)
REF_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,199}$")
ENVIRONMENT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
EXAMPLE_SPEC = "example-orders-2025-01"
SECRET_NAMES = (
    "BACKFILLCTL_AIRFLOW_URL",
    "BACKFILLCTL_AIRFLOW_TOKEN",
    "BACKFILLCTL_AIRFLOW_USERNAME",
    "BACKFILLCTL_AIRFLOW_PASSWORD",
)


@dataclass(frozen=True, slots=True)
class StarterOptions:
    workflows_repo: str  # OWNER/REPO of backfillctl
    ref: str  # the tag or commit SHA both the workflows and the pre-commit hook are pinned to
    environment: str = DEFAULT_ENVIRONMENT

    def problems(self) -> list[tuple[str, str]]:
        """(option, what is wrong) for each value that cannot go into the files as it is."""
        found = []
        if not REPO_PATTERN.fullmatch(self.workflows_repo):
            found.append(("--workflows-repo", f"{self.workflows_repo!r} is not OWNER/REPO"))
        if not REF_PATTERN.fullmatch(self.ref) or ".." in self.ref:
            found.append(("--ref", f"{self.ref!r} is not a tag, branch or commit SHA"))
        if not ENVIRONMENT_PATTERN.fullmatch(self.environment):
            found.append(("--environment", f"{self.environment!r} is not an environment name"))
        return found

    @property
    def placeholder(self) -> bool:
        return self.workflows_repo == PLACEHOLDER_REPO


def starter_files(options: StarterOptions) -> tuple[tuple[str, str], ...]:
    """(path relative to the new repository, text) of every file `init` writes, in the order it writes them."""
    tokens = {"@REPO@": options.workflows_repo, "@REF@": options.ref, "@ENVIRONMENT@": options.environment}

    def fill(text: str) -> str:
        for token, value in tokens.items():
            text = text.replace(token, value)
        return text

    return tuple((path, fill(text)) for path, text in _TEMPLATES)


def _call(workflow: str, more_inputs: str, secrets: str) -> str:
    """The one job of a caller: this repository's reusable `workflow` at the pinned ref, and its inputs."""
    return (
        f"jobs:\n  backfill:\n    uses: @REPO@/.github/workflows/{workflow}@@REF@\n    with:\n"
        '      specs-dir: specs\n      backfillctl-repository: @REPO@\n      backfillctl-version: "@REF@"\n'
        f"{more_inputs}    secrets: # {secrets}\n"
    )


def _secrets_block(indent: str, names: tuple[str, ...]) -> str:
    return "".join(f"{indent}{name}: ${{{{ secrets.{name} }}}}\n" for name in names)


POLICY = """\
# Guardrails for every spec in this repository (reference: the backfillctl README, "Policy fields").
version: 1
# Every spec names the change ticket that authorises it.
ticket_pattern: '^(CHG|INC)-[0-9]+$'
# Reviewers see how many DAG runs a spec may create; `plan` refuses more than `expected_runs`.
require_expected_runs: true
# No spec may run more DAG runs at once than this.
max_active_runs_limit: 8
# A managed backfill paused by hand in Airflow is reported (`heal` would unpause it).
drift: report
# Git authors' e-mail → GitHub login, for separation of duties (noreply addresses need no entry).
# author_logins: {alice@example.com: alice}
rules: # the first rule whose `dags` glob matches a spec's dag_id applies
  - dags: ["*"]
    min_approvers: 1
    min_approvers_for_completed: 2 # re-running successful runs needs more eyes
    max_runs: 1000 # blast radius: a spec creating more DAG runs than this is refused
    require_canary_for_completed: false
# Capacity budgets of shared systems: a spec listing one in `downstream` waits while it is full, and one of
# its owners must approve the pull request.
downstream:
  warehouse: {max_active_runs: 8, owners: [warehouse-oncall]}
# No backfill runs in a freeze (running ones are paused, and resumed after it).
# freeze:
#   - {from: "2026-12-28T00:00:00Z", to: "2027-01-04T00:00:00Z", reason: "year-end close"}
# Default run windows (a spec may override them with `windows:`).
# windows:
#   - {days: [mon, tue, wed, thu, fri], start: "20:00", end: "06:00", timezone: Europe/Berlin}
# Pause running managed backfills while Airflow's scheduler is unhealthy.
scheduler_guard: {pause_when_unhealthy: true}
"""

EXAMPLE = f"""\
# An example spec: it validates as it is. Copy it (or run `backfillctl new`) for a real backfill, and
# delete this file before the first merge to main: reconcile creates every spec it finds under specs/.
version: 1
name: {EXAMPLE_SPEC} # must equal the file name
dag_id: orders_daily
from_date: "2025-01-01" # inclusive; a date means 00:00 UTC
to_date: "2025-01-07" # inclusive
reprocess_behavior: failed # none | failed | completed: which existing runs to re-run
max_active_runs: 2
expected_runs: 7 # the reviewed upper bound; `backfillctl plan` shows Airflow's own count
ticket: CHG-1234
reason: Re-run the failed January runs after the upstream export was repaired.
requested_by: etl-oncall
approvers: [data-platform-lead] # must approve the pull request; never the requester
downstream: [warehouse] # a budget of the policy: one of its owners approves too
"""

PRE_COMMIT = """\
# `pre-commit install` once per clone: specs are validated before each commit.
repos:
  - repo: https://github.com/@REPO@
    rev: "@REF@"
    hooks:
      - id: backfillctl-validate
"""

PR_CALLER = (
    """\
# Pull requests: validate the specs, the approval gate from code review, and the plan as one sticky comment.
# Make the check `backfill / validate-and-plan` required on main. The called workflow runs backfillctl @REF@
# of @REPO@ (pin it: a tag, or a commit SHA) over this pull request's specs as data, never its code.
name: backfill-pr
on:
  pull_request:
  pull_request_review:
    types: [submitted, dismissed]
permissions:
  contents: read
  pull-requests: write
concurrency:
  group: backfill-pr-${{ github.event.pull_request.number }}
  cancel-in-progress: true
"""
    + _call("reusable-backfill-pr.yml", "", "the plan's read-only Airflow identity, on the plan step only")
    + _secrets_block("      ", SECRET_NAMES)
)

RECONCILE_CALLER = (
    """\
# After merge, every 15 minutes and by hand: make Airflow match specs/ (audited). The called workflow checks
# that each spec the merged pull request adds or changes was approved by the reviews the gate needs, records
# who approved, and refuses the others. Keep the secrets in the `@ENVIRONMENT@` environment, restricted to
# main (Settings → Environments → deployment branches).
name: backfill-reconcile
on:
  push:
    branches: [main]
    paths: ["specs/**"]
  schedule:
    - cron: "*/15 * * * *"
  workflow_dispatch:
    inputs:
      plan_checksum:
        description: Optional checksum of a reviewed plan; reconcile refuses (exit 5) when its own plan differs.
        required: false
        default: ""
permissions:
  contents: read
  pull-requests: read
concurrency:
  group: backfill-reconcile
  cancel-in-progress: false
"""
    + _call(
        "reusable-backfill-reconcile.yml",
        "      environment: \"@ENVIRONMENT@\"\n      plan-checksum: ${{ inputs.plan_checksum || '' }}\n",
        "the store and the reconciler's Airflow identity",
    )
    + _secrets_block("      ", ("BACKFILLCTL_STORE_URL", *SECRET_NAMES, "BACKFILLCTL_AUDIT_KEY"))
)

STOP_CALLER = (
    """\
# Emergency stop of a downstream system's backfills, by one of its owners (`downstream.<system>.owners` in
# specs/policy.yaml; GitHub's identity decides): Actions → backfill-stop → Run workflow. The affected backfills
# are paused at once and stay paused until an owner lifts the stop (run it again with `lift`), it expires, or a
# reviewed `resume: "stop #N: …"` in the spec names it. The called workflow runs backfillctl @REF@ of @REPO@.
name: backfill-stop
on:
  workflow_dispatch:
    inputs:
      downstream:
        description: The downstream system (a key of `downstream` in specs/policy.yaml).
        type: string
        required: true
      reason:
        description: Why.
        type: string
        required: true
      expires:
        description: Optional, e.g. 4h; empty = until an owner lifts it.
        type: string
        default: ""
      lift:
        description: Lift the system's stop instead.
        type: boolean
        default: false
permissions:
  contents: read
"""
    + _call(
        "reusable-backfill-stop.yml",
        '      environment: "@ENVIRONMENT@"\n'
        "      downstream: ${{ inputs.downstream }}\n      reason: ${{ inputs.reason }}\n"
        "      expires: ${{ inputs.expires }}\n      lift: ${{ inputs.lift }}\n",
        "the store, the Airflow identity that pauses, and optionally a read:org token for ORG/TEAM owners",
    )
    + _secrets_block(
        "      ", ("BACKFILLCTL_STORE_URL", *SECRET_NAMES, "BACKFILLCTL_AUDIT_KEY", "BACKFILLCTL_ORG_READ_TOKEN")
    )
)

CODEOWNERS = """\
# Branch protection is the primary gate: on main, require a pull request, "Require review from Code Owners"
# and the check `backfill / validate-and-plan`. GitHub then needs an approval from an owner of the last
# matching line; backfillctl's gate adds each spec's own approvers and the downstream owners it names.
# Replace these logins (or use @ORG/TEAM): the policy's approvers and downstream owners, and the platform team.
/specs/ @data-platform-lead @warehouse-oncall
/specs/policy.yaml @data-platform-lead
/.github/ @data-platform-lead
"""

README = """\
# Backfills

Backfills of our Airflow DAGs, as reviewed specs: one YAML file per backfill under `specs/`, checked and
planned on every pull request, applied by reconcile after merge, each step audited (backfillctl @REF@).

1. Branch, then write the spec (or copy `specs/@EXAMPLE@.yaml`; delete the example before the
   first merge):

   ```bash
   backfillctl new NAME --dag-id DAG_ID --from 2025-01-01 --to 2025-01-31 --reprocess failed \\
       --ticket CHG-1234 --reason "WHY, in a sentence" --approver LOGIN --expected-runs 31
   ```

   `--reprocess` is none (only dates without a run), failed or completed (all); the approver is who must
   approve the pull request, never you. `--expected-runs` is the reviewed upper bound of runs (31 daily
   runs here): with `BACKFILLCTL_AIRFLOW_URL` set, leave it out and `new` takes Airflow's dry-run count.
2. `backfillctl validate` and, with Airflow configured, `backfillctl plan`.
3. Open a pull request: the check validates, gates the approvals and posts the plan. The spec's
   `approvers` (and an owner of each `downstream` system) approve it in code review.
4. Merge: reconcile re-checks those approvals, creates the backfill and records who approved it;
   `backfillctl report NAME` is the change record.

In an emergency, an owner of a `downstream` system pauses its backfills at once: Actions → backfill-stop →
Run workflow (the same again with `lift` resumes them).

Set-up once: the secrets `BACKFILLCTL_STORE_URL` and `BACKFILLCTL_AIRFLOW_URL` with a token
(`BACKFILLCTL_AIRFLOW_TOKEN`) or a login (`BACKFILLCTL_AIRFLOW_USERNAME` / `_PASSWORD`) in the
`@ENVIRONMENT@` environment; branch protection on main as `.github/CODEOWNERS` says; `pre-commit install`.
Give reconcile its own Airflow identity with only the permissions it needs (backfillctl's
docs/least-privilege.md).
""".replace("@EXAMPLE@", EXAMPLE_SPEC)

_TEMPLATES = (
    ("specs/policy.yaml", POLICY),
    (f"specs/{EXAMPLE_SPEC}.yaml", EXAMPLE),
    (".pre-commit-config.yaml", PRE_COMMIT),
    (".github/workflows/backfill-pr.yml", PR_CALLER),
    (".github/workflows/backfill-reconcile.yml", RECONCILE_CALLER),
    (".github/workflows/backfill-stop.yml", STOP_CALLER),
    (".github/CODEOWNERS", CODEOWNERS),
    ("README.md", README),
)
