"""Issue 44 through `backfillctl validate` (offline): the policy's scope, located refusals, the skipped tag check."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main
from controller.core.documents.starter import POLICY

SPEC = """version: 1
name: {name}
dag_id: {dag}
from_date: "2025-01-01"
to_date: "2025-01-07"
reprocess_behavior: none
max_active_runs: 3
ticket: CHG-1
reason: A reason long enough.
requested_by: alice
approvers: [bob]
"""


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mine.yaml").write_text(SPEC.format(name="mine", dag="fin_daily"))
    (tmp_path / "specs" / "theirs.yaml").write_text(SPEC.format(name="theirs", dag="ads_daily"))
    return tmp_path


def policy(tree: Path, scope: str) -> None:
    (tree / "specs" / "policy.yaml").write_text(f"version: 1\nrequire_reviewed_merge: false\n{scope}")


def test_a_spec_outside_the_scope_is_refused_located_and_naming_the_scope(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy(tree, 'scope: {dags: ["fin_*"]}\n')
    assert main(["validate"]) == 1
    assert capsys.readouterr().out == (
        "specs/theirs.yaml:3:9: $.dag_id: DAG ads_daily is outside this repository's scope (dags [fin_*]; "
        "specs/policy.yaml)\n"
        "  hint: a spec may touch only the DAGs of its repository's scope (policy `scope`): another team's DAG is "
        "backfilled from that team's specs repository, or widen `scope` in a reviewed policy change\n"
        "1 error, 0 warnings in 3 files including the policy specs/policy.yaml.\n"
    )


def test_offline_a_tag_scope_says_the_tag_check_was_skipped(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy(tree, 'scope: {dags: ["fin_*"], tags: [finance]}\n')
    assert main(["validate"]) == 0
    out = capsys.readouterr().out
    assert out == (
        "specs/theirs.yaml:3:9: $.dag_id: warning: DAG ads_daily matches none of the scope's dags "
        "(specs/policy.yaml); whether it carries one of its tags [finance] needs Airflow: the tag check was skipped "
        "(tag check skipped)\n"
        "  hint: validate with Airflow configured (BACKFILLCTL_AIRFLOW_URL) checks the tags; plan and reconcile do\n"
        "OK: 2 specs valid (3 files including the policy specs/policy.yaml, 1 warning).\n"
    )


def test_a_policy_without_scope_is_warned_about(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy(tree, "")
    assert main(["validate"]) == 0
    assert capsys.readouterr().out == (
        "specs/policy.yaml:1:1: warning: scope is not set: specs of this repository may touch every DAG in Airflow\n"
        "  hint: add `scope: {dags: [your_team_*]}` (or `tags: [your-team]`): the DAGs this repository may touch "
        'on a shared Airflow (README, "Several teams, one Airflow")\n'
        "OK: 2 specs valid (3 files including the policy specs/policy.yaml, 1 warning).\n"
    )


@pytest.mark.parametrize(
    ("scope", "why"),
    [
        ("scope: {}\n", "should be non-empty"),
        ("scope: {dags: []}\n", "specs/policy.yaml:3:15: $.scope.dags: the list is empty"),
        (
            "scope: {teams: [a]}\n",
            "specs/policy.yaml:3:9: $.scope.teams: unknown field 'teams'\n  hint: did you mean 'tags'?",
        ),
        ("scope: {tags: [a, a]}\n", "non-unique elements"),
    ],
)
def test_a_malformed_scope_is_a_schema_error(
    tree: Path, capsys: pytest.CaptureFixture[str], scope: str, why: str
) -> None:
    policy(tree, scope)
    assert main(["validate"]) == 1
    assert why in capsys.readouterr().out


def test_the_starter_policy_sets_a_scope_and_says_how_to_set_it() -> None:
    assert '\nscope:\n  dags: ["*"] # replace with your team\'s DAGs, e.g. ["finance_*"], or use tags: [finance]\n' in (
        POLICY
    )
    assert "Name your team's DAGs by id glob and/or by Airflow DAG tag" in POLICY
