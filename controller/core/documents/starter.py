"""The files of a new specs repository for `backfillctl init` (pure: texts only; commands/verbs/init.py writes them).

Every file is a template with a few tokens: the repository of backfillctl (its reusable workflows and the
pre-commit hook), the commit pinning both (with the release it is, as a comment), the runner the jobs run on and
the GitHub environment holding the reconcile job's secrets.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from controller.core.documents.secret_places import SECRETS, Place, secrets_table
from controller.errors import UsageError

# not a real repository: `init` says so until --workflows-repo names where backfillctl lives
PLACEHOLDER_REPO = "YOUR-ORG/airflow-backfill-controller"
DEFAULT_ENVIRONMENT = "backfill-production"
# GitHub's OWNER/NAME: an owner of letters, digits and inner hyphens; a name of letters, digits, `.`, `_`, `-`, never
# `.` or `..` (a path step: `--workflows-repo ../..` would point `uses:` somewhere else)
REPO_PATTERN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?/(?!\.\.?$)[A-Za-z0-9_.-]{1,100}$")
# a tag, branch or commit SHA as git allows it, without what YAML or a shell would read otherwise (the files
# quote it: a SHA of digits only, or `1.0`, is a number to YAML)
REF_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,199}$")
ENVIRONMENT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
DEFAULT_RUNNER = "ubuntu-latest"
# a runner label as GitHub shows them (self-hosted labels: letters, digits, `-`, `_`, `.`, `:`), never a quote
RUNNER_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
VERSION_PATTERN = re.compile(r"^[0-9A-Za-z.+!-]{1,64}$")
EXAMPLE_SPEC = "example-orders-2025-01"
PLAN_SECRETS = tuple(n for row in SECRETS if row.place is Place.repository for n in row.names)
_ENVIRONMENT_SECRETS = tuple(n for row in SECRETS if row.place is Place.environment for n in row.names)
RECONCILE_SECRETS = tuple(n for n in _ENVIRONMENT_SECRETS if n != "BACKFILLCTL_ORG_READ_TOKEN")
STOP_SECRETS = _ENVIRONMENT_SECRETS


@dataclass(frozen=True, slots=True)
class StarterOptions:
    workflows_repo: str  # OWNER/REPO of backfillctl
    ref: str  # the commit SHA (or a tag, by hand) both the workflows and the pre-commit hook are pinned to
    environment: str = DEFAULT_ENVIRONMENT
    runner: str = DEFAULT_RUNNER  # a label, or a JSON list of labels
    version: str | None = None  # the backfillctl release `ref` is, written beside each pin

    def problems(self) -> list[tuple[str, str]]:
        """(option, what is wrong) for each value that cannot go into the files as it is."""
        found = []
        if not REPO_PATTERN.fullmatch(self.workflows_repo):
            found.append(("--workflows-repo", f"{self.workflows_repo!r} is not OWNER/REPO"))
        if not REF_PATTERN.fullmatch(self.ref) or ".." in self.ref:
            found.append(("--ref", f"{self.ref!r} is not a tag, branch or commit SHA"))
        if not ENVIRONMENT_PATTERN.fullmatch(self.environment):
            found.append(("--environment", f"{self.environment!r} is not an environment name"))
        if runner_labels(self.runner) is None:
            found.append(("--runner", f"{self.runner!r} is not a runner label or a JSON list of labels"))
        if self.version is not None and not VERSION_PATTERN.fullmatch(self.version):
            found.append(("--ref", f"the version {self.version!r} cannot be written beside the pin"))
        return found

    @property
    def placeholder(self) -> bool:
        return self.workflows_repo == PLACEHOLDER_REPO

    @property
    def pinned_to_commit(self) -> bool:
        return FULL_SHA.fullmatch(self.ref) is not None


def runner_labels(runner: str) -> tuple[str, ...] | None:
    """The labels of `runner` (one label, or a JSON list of them), or None when it is neither."""
    if not runner.startswith("["):
        return (runner,) if RUNNER_LABEL.fullmatch(runner) else None
    try:
        labels = json.loads(runner)
    except ValueError:
        return None
    if not isinstance(labels, list) or not labels:
        return None
    if not all(isinstance(label, str) and RUNNER_LABEL.fullmatch(label) for label in labels):
        return None
    return tuple(labels)


def _runner_value(runner: str) -> str:
    """The `runner:` input as the reusable workflows read it (a JSON list without spaces), quoted for YAML."""
    labels = runner_labels(runner)
    if labels is None:  # problems() refuses it first; rendering it anyway would write a workflow that never runs
        raise UsageError(f"--runner {runner!r} is not a runner label or a JSON list of labels")
    shown = labels[0] if not runner.startswith("[") else json.dumps(list(labels), separators=(",", ":"))
    return f"'{shown}'"


def starter_files(options: StarterOptions) -> tuple[tuple[str, str], ...]:
    """(path relative to the new repository, text) of every file `init` writes, in the order it writes them."""
    note = f" # backfillctl {options.version}" if options.version else ""
    tokens = {
        "@REPO@": options.workflows_repo,
        "@REF@": options.ref,
        "@PIN_NOTE@": note,
        "@ENVIRONMENT@": options.environment,
        "@RUNNER@": _runner_value(options.runner),
    }

    def fill(text: str) -> str:
        for token, value in tokens.items():
            text = text.replace(token, value)
        return text

    return tuple((path, fill(text)) for path, text in _TEMPLATES)


def _call(workflow: str, more_inputs: str, secrets: str) -> str:
    """The one job of a caller: this repository's reusable `workflow` at the pinned commit, and its inputs."""
    return (
        f"jobs:\n  backfill:\n    uses: @REPO@/.github/workflows/{workflow}@@REF@@PIN_NOTE@\n    with:\n"
        '      specs-dir: specs\n      backfillctl-repository: @REPO@\n      backfillctl-version: "@REF@"@PIN_NOTE@\n'
        "      runner: @RUNNER@ # a label, or a JSON list of labels: it must reach Airflow's API and the store\n"
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
# Reconcile refuses what starts work without a reviewed pull request behind it (a direct push, a merge whose
# evidence the reconcile workflow could not pass); reductions (pause, cancel) still apply (docs/ci-trust.md).
require_reviewed_merge: true
# The DAGs this repository may touch on a shared Airflow: a spec on any other DAG is refused (validate, reconcile).
# Name your team's DAGs by id glob and/or by Airflow DAG tag; each team has its own repository, store and Airflow
# login (README, "Several teams, one Airflow"). Widening it is judged under the base policy, like any loosening.
scope:
  dags: ["*"] # replace with your team's DAGs, e.g. ["finance_*"], or use tags: [finance]
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
# Stops from the backfill-stop workflow are recorded as `workflow` only with its run's OIDC token naming these.
# stop_workflow:
#   repository: OWNER/THIS-REPOSITORY
#   workflow: @REPO@/.github/workflows/reusable-backfill-stop.yml
#   ref: refs/heads/main
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
    rev: "@REF@"@PIN_NOTE@
    hooks:
      - id: backfillctl-validate
"""

PR_CALLER = (
    """\
# Pull requests: validate the specs, the approval gate from code review, and the plan as one sticky comment.
# Make the check `backfill / validate-and-plan` required on main. The called workflow runs backfillctl @REF@
# of @REPO@ (a full commit SHA: a tag can be moved) over this pull request's specs as data, never its code. Its
# secrets are repository secrets: the plan's own read-only Airflow login (README.md, "Secrets").
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
    + _call("reusable-backfill-pr.yml", "", "repository secrets: the plan's read-only Airflow login, on its step only")
    + _secrets_block("      ", PLAN_SECRETS)
)

RECONCILE_CALLER = (
    """\
# After merge, every 15 minutes and by hand: make Airflow match specs/ (audited). The called workflow checks
# that each spec the merged pull request adds or changes was approved by the reviews the gate needs, records
# who approved, and refuses the others. Its secrets are secrets of the `@ENVIRONMENT@` environment, restricted to
# main (Settings → Environments → deployment branches), never repository secrets (README.md, "Secrets").
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
  pull-requests: write # only the called workflow's pr-result job uses it: the result on the merged pull request
concurrency:
  group: backfill-reconcile
  cancel-in-progress: false
"""
    + _call(
        "reusable-backfill-reconcile.yml",
        "      environment: \"@ENVIRONMENT@\"\n      plan-checksum: ${{ inputs.plan_checksum || '' }}\n",
        "environment secrets of @ENVIRONMENT@: the store and the reconciler's Airflow login",
    )
    + _secrets_block("      ", RECONCILE_SECRETS)
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
  id-token: write # the stop job's OIDC token proves the policy's stop_workflow made the stop (else it is `cli`)
"""
    + _call(
        "reusable-backfill-stop.yml",
        '      environment: "@ENVIRONMENT@"\n'
        "      downstream: ${{ inputs.downstream }}\n      reason: ${{ inputs.reason }}\n"
        "      expires: ${{ inputs.expires }}\n      lift: ${{ inputs.lift }}\n",
        "environment secrets of @ENVIRONMENT@: reconcile's, and optionally a read:org token for ORG/TEAM owners",
    )
    + _secrets_block("      ", STOP_SECRETS)
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

## Set-up once

- **Secrets.** The PR check's plan reads Airflow with a read-only login of its own, as *repository* secrets
  (Settings → Secrets and variables → Actions); reconcile and the emergency stop read the store and their own
  Airflow login as secrets of the `@ENVIRONMENT@` *environment* (Settings → Environments), restricted to main
  by its deployment branches and without required reviewers (they would hold every scheduled reconcile and
  every stop for an approval). Never set the environment's secrets as repository secrets: every branch's
  workflows could read them. Without the plan's secrets the check warns "no plan" on each pull request.

@SECRETS@
- **The runner** (`runner:` in the three workflows, `ubuntu-latest` by default) must reach Airflow's API and
  the store; nothing reaches in. A private Airflow needs a self-hosted runner in its network (backfillctl's
  docs/deploy.md); a private backfillctl repository must allow Actions access from this one.
- Branch protection on main as `.github/CODEOWNERS` says; `pre-commit install`.
- Give reconcile its own Airflow identity with only the permissions it needs (backfillctl's
  docs/least-privilege.md).

## Upgrading backfillctl

The workflows and the pre-commit hook are pinned to one commit of backfillctl (@REF@), the release beside it
as a comment. Follow backfillctl's docs/upgrade.md (back up the store, `store migrate`, `audit verify`), then
put the new commit in all four places at once, in one pull request:

```bash
git grep -l @REF@ -- .github .pre-commit-config.yaml |
    xargs sed -i "s/@REF@/NEW_SHA/g; s/backfillctl [0-9][^ ]*$/backfillctl NEW_VERSION/"
```
""".replace("@EXAMPLE@", EXAMPLE_SPEC).replace("@SECRETS@", secrets_table())

GITIGNORE = """\
# backfillctl's local store (a SQLite file when BACKFILLCTL_STORE_URL is not set): never committed
.backfillctl/
"""

_TEMPLATES = (
    ("specs/policy.yaml", POLICY),
    (f"specs/{EXAMPLE_SPEC}.yaml", EXAMPLE),
    (".pre-commit-config.yaml", PRE_COMMIT),
    (".github/workflows/backfill-pr.yml", PR_CALLER),
    (".github/workflows/backfill-reconcile.yml", RECONCILE_CALLER),
    (".github/workflows/backfill-stop.yml", STOP_CALLER),
    (".github/CODEOWNERS", CODEOWNERS),
    ("README.md", README),
    (".gitignore", GITIGNORE),
)
