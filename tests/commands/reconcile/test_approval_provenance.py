"""The approval gate at reconcile: the specs the merged commit adds or changes are created only with their
approvals in the merged pull request's reviews (the rules of PR time); the create intent and the change record
name each approving review; a refused spec stays refused on later passes; without evidence the record says so."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from controller.adapters.gitsource import GitSource
from controller.adapters.store.audit_log import EventFilter
from controller.cli import main
from controller.commands.reconcile.evidence import from_reviews
from controller.commands.reconcile.gate import EvidenceGiven
from controller.core.model.binding import Approval, ApprovedReview, Phase
from controller.core.plan.values import Kind
from tests.commands.reconcile.harness import Bench
from tests.support.logcheck import message_of


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "alice", "GIT_AUTHOR_EMAIL": "alice@x"}
    env |= {"GIT_COMMITTER_NAME": "alice", "GIT_COMMITTER_EMAIL": "alice@x"}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout.strip()


def review(login: str, state: str, review_id: int, at: str, permission: str = "write") -> dict[str, Any]:
    return {
        "id": review_id,
        "user": {"login": login},
        "state": state,
        "commit_id": "c0ffee",
        "submitted_at": at,
        "author_association": "MEMBER",
        "permission": permission,
    }


def merged(bench: Bench, *specs: str) -> str:
    """A repository whose HEAD adds `specs` (and an older commit that added `old`)."""
    git(bench.root, "init", "-q", "-b", "main")
    bench.spec("old", dag="demo_tz")  # another DAG: not queued behind the new spec
    git(bench.root, "add", "-A")
    git(bench.root, "commit", "-qm", "old")
    for name in specs:
        bench.spec(name)
    git(bench.root, "add", "-A")
    git(bench.root, "commit", "-qm", "Merge pull request #41")
    return git(bench.root, "rev-parse", "HEAD")


def evidence(tmp_path: Path, reviews: list[dict[str, Any]], author: str = "alice", number: int = 41) -> Any:
    """The deprecated `--pr-reviews --pr-number --pr-author` of HEAD's merge."""
    path = tmp_path / "reviews.json"
    path.write_text(__import__("json").dumps([reviews]))  # gh api --paginate --slurp: an array of pages
    return EvidenceGiven((from_reviews(path, number, author, GitSource(path.parent / "specs")),))


def test_a_spec_without_its_approvals_is_refused_and_nothing_is_created(bench: Bench, tmp_path: Path) -> None:
    merged(bench, "new")
    reconciler = bench.reconciler()
    reconciler.evidence = evidence(tmp_path, [review("bob", "CHANGES_REQUESTED", 9000, "2026-11-01T09:00:00Z")])
    result = reconciler.run_once()
    assert result.refused == [
        "new: approval gate at reconcile: the approvals of #41 are not there: new: 'bob' has not approved the "
        "pull request (latest review: CHANGES_REQUESTED); new: 0 of the 1 approvals this spec needs are present"
    ]
    # "old" is not the merged commit's: created without evidence
    assert [(a[0].spec, a[1]) for a in result.applied] == [("old", "created")]
    assert bench.fake is not None
    assert [b["dag_id"] for b in bench.fake.backfills.values()] == ["demo_tz"]
    (blocked,) = [e for e in bench.store.events(EventFilter(spec="new")) if e.entry.phase == "observation"]
    assert (blocked.entry.action, blocked.entry.outcome, blocked.entry.message) == (
        "observe",
        "Blocked",
        result.refused[0].removeprefix("new: "),
    )

    later = bench.reconciler()  # a later pass without the reviews (a schedule, a hand run): still refused
    again = later.run_once()
    assert again.refused == result.refused
    bench.spec("next", dag="demo_hourly", start="2025-01-01T00:00:00Z", end="2025-01-01T02:00:00Z")
    git(bench.root, "add", "-A")
    git(bench.root, "commit", "-qm", "Merge pull request #42")  # the next merge does not lift the refusal
    after_next = bench.reconciler()
    after_next.evidence = evidence(tmp_path, [review("bob", "APPROVED", 9100, "2026-11-02T10:00:00Z")], number=42)
    third = after_next.run_once()
    assert third.refused == result.refused
    assert sorted(b["dag_id"] for b in bench.fake.backfills.values()) == ["demo_hourly", "demo_tz"]


def test_the_create_records_who_approved_and_the_report_names_it(
    bench: Bench, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    commit = merged(bench, "new")
    reconciler = bench.reconciler()
    reconciler.evidence = evidence(
        tmp_path,
        [
            review("carol", "COMMENTED", 8999, "2026-11-01T09:00:00Z"),
            review("bob", "APPROVED", 9001, "2026-11-01T10:00:00Z"),
            review("alice", "APPROVED", 9002, "2026-11-01T10:01:00Z"),  # the author's own: never counts
        ],
    )
    result = reconciler.run_once()
    assert result.refused == []
    assert sorted((a[0].spec, a[1]) for a in result.applied if a[0].kind is Kind.CREATE) == [
        ("new", "created"),
        ("old", "created"),
    ]
    base = git(bench.root, "rev-parse", "HEAD~1")
    bob = ApprovedReview("bob", 9001, "c0ffee", "2026-11-01T10:00:00Z")
    approval = Approval(41, commit, (bob,), "", base, None, "")
    intents = {e.entry.spec_name: e.entry for e in bench.store.events(EventFilter()) if e.entry.phase == "intent"}
    assert intents["new"].request is not None
    assert intents["new"].request["approval"] == approval.as_json()
    assert intents["new"].message == (
        "requested by alice, spec authored by alice@x, approved by bob in #41 (review 9001, 2026-11-01T10:00Z); "
        "ticket CHG-1"
    )
    assert intents["old"].request is not None
    assert "approval" not in intents["old"].request  # not the merged commit's spec: no evidence for it
    assert intents["old"].message == (
        "requested by alice, spec authored by alice@x, approval not recorded (the spec lists bob); ticket CHG-1"
    )
    assert bench.store.bindings()["new"].approval == approval
    assert bench.store.bindings()["new"].phase is not Phase.BLOCKED

    monkeypatch.chdir(bench.root)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", bench.store_url)
    for name, words in (
        ("new", r"bob in \#41 \(review 9001, 2026-11-01T10:00Z\)"),  # escaped: the logins are outside text
        ("old", r"approval not recorded \(the spec lists bob\)"),
    ):
        assert main(["report", name]) == 0
        assert f"- **Requested by**: alice; **approved by**: {words}\n" in capsys.readouterr().out


def test_reconcile_takes_the_evidence_whole(tmp_path: Path, capsys: Any) -> None:
    assert main(["reconcile", "--pr-number", "41"]) == 2
    assert "--pr-reviews, --pr-number and --pr-author go together" in capsys.readouterr().err
    (tmp_path / "reviews.json").write_text("{}")
    code = main(["reconcile", "--pr-reviews", str(tmp_path / "reviews.json"), "--pr-number", "4", "--pr-author", "a"])
    assert code == 1
    first, *rest = capsys.readouterr().err.splitlines(keepends=True)
    assert message_of(first.rstrip("\n")).startswith("--pr-reviews, --pr-number and --pr-author are deprecated")
    assert "".join(rest) == (
        f"error: --pr-reviews: {tmp_path}/reviews.json:1:1: the reviews file must hold JSON arrays of reviews, "
        "found a JSON object here\n"
        "  hint: save the reviews with `gh api --paginate --slurp repos/OWNER/REPO/pulls/N/reviews` (a JSON array, "
        "one array per page, or an array of pages)\n"
    )
