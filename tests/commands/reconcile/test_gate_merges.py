"""The approval gate at reconcile holds whatever merges, in a real git repository on the fake Airflow: a merge
commit, a squash, a rebase of several commits (each spec the pull request adds is judged, not only its last
commit's), an approval of an older commit, a policy the pull request loosens itself, an approver or an owner who
authored a commit, two merges in one pass, a merge queue, a direct push, a force-push, an outage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main
from controller.commands.reconcile.evidence import read_document
from controller.commands.reconcile.gate import EvidenceGiven
from controller.commands.reconcile.reconciler import PassResult
from controller.core.model.stops import EmergencyStopKind, StopSource
from controller.core.plan.values import Kind
from tests.commands.reconcile.forge import Forge, git, review
from tests.commands.reconcile.harness import Bench, in_process

OWNED = "version: 1\nrequire_reviewed_merge: false\ndownstream:\n  warehouse: {max_active_runs: 8, owners: [olga]}\n"


@pytest.fixture
def forge(bench: Bench) -> Forge:
    made = Forge(bench)
    bench.policy("version: 1\nrequire_reviewed_merge: false\n")
    made.commit("policy")
    return made


def run(bench: Bench, *documents: Path, unavailable: tuple[str, ...] = ()) -> PassResult:
    reconciler = bench.reconciler()
    reconciler.evidence = EvidenceGiven(tuple(read_document(p) for p in documents), unavailable)
    return reconciler.run_once()


def created(bench: Bench) -> list[str]:
    assert bench.fake is not None
    return sorted(b["dag_id"] for b in bench.fake.backfills.values())


def two_specs(bench: Bench, forge: Forge, author: str = "alice") -> Any:
    """A pull request whose first commit adds `sneaky` (demo_tz) and second `decoy` (demo_daily)."""
    pull = forge.open(author)
    bench.spec("sneaky", dag="demo_tz")
    forge.push(pull, "add sneaky")
    bench.spec("decoy")
    forge.push(pull, "add decoy")
    return pull


@pytest.mark.parametrize("method", ["merge", "squash", "rebase"])
def test_every_spec_a_pull_request_adds_is_judged_whatever_merges_it(bench: Bench, forge: Forge, method: str) -> None:
    pull = two_specs(bench, forge)
    merged = forge.merge(pull, method)
    refused = forge.document(merged, review("bob", "changes_requested", pull.head))
    result = run(bench, refused)
    why = (
        "approval gate at reconcile: the approvals of #41 are not there: {0}: 'bob' has not approved the pull request "
        "(latest review: CHANGES_REQUESTED); {0}: 0 of the 1 approvals this spec needs are present"
    )
    assert result.refused == [f"decoy: {why.format('decoy')}", f"sneaky: {why.format('sneaky')}"]
    assert created(bench) == []
    assert bench.run().refused == result.refused  # a later pass without the evidence refuses them still


@pytest.mark.parametrize("method", ["merge", "squash", "rebase"])
def test_approved_at_its_head_every_spec_of_the_pull_request_is_created(
    bench: Bench, forge: Forge, method: str
) -> None:
    pull = two_specs(bench, forge)
    merged = forge.merge(pull, method)
    result = run(bench, forge.document(merged, review("bob", "approved", pull.head)))
    assert result.refused == []
    assert created(bench) == ["demo_daily", "demo_tz"]
    approval = bench.store.bindings()["sneaky"].approval
    assert approval is not None
    assert (approval.pr_number, approval.base_sha, approval.head_sha, approval.merged_commit) == (
        41,
        merged.base_sha,
        pull.head,
        merged.merge_sha,
    )
    assert approval.url == "https://github.com/acme/specs/pull/41"
    assert [(r.login, r.commit_id) for r in approval.reviews] == [("bob", pull.head)]


def test_a_rebase_refused_exits_5_through_the_command(
    bench: Bench, forge: Forge, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pull = two_specs(bench, forge)
    merged = forge.merge(pull, "rebase")
    document = forge.document(merged, review("bob", "commented", pull.head))
    in_process(bench, monkeypatch)
    monkeypatch.chdir(bench.root)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    assert main(["reconcile", "--once", "--evidence", str(document)]) == 5
    err = capsys.readouterr().err
    assert "refused: decoy: approval gate at reconcile: the approvals of #41 are not there" in err
    assert "refused: sneaky: approval gate at reconcile: the approvals of #41 are not there" in err
    assert created(bench) == []


def test_an_approval_of_an_older_commit_does_not_count(bench: Bench, forge: Forge) -> None:
    pull = forge.open()
    bench.spec("first", dag="demo_tz")
    approved = forge.push(pull, "add first")
    bench.spec("wider", dag="demo_tz", end="2025-03-31")  # pushed after the approval: a wider range, unseen
    forge.push(pull, "widen")
    merged = forge.merge(pull, "squash")
    result = run(bench, forge.document(merged, review("bob", "approved", approved)))
    stale = f"'bob' approved commit {approved[:12]}, not the pull request's head {pull.head[:12]}"
    assert [r.split(": ", 1)[0] for r in result.refused] == ["first", "wider"]
    assert all(stale in r for r in result.refused)
    assert created(bench) == []


def test_the_policy_of_the_base_judges_not_the_one_the_pull_request_loosens(bench: Bench, forge: Forge) -> None:
    bench.policy(OWNED)
    forge.commit("warehouse owners")
    pull = forge.open("mallory")
    bench.policy("version: 1\nrequire_reviewed_merge: false\ndownstream:\n  warehouse: {max_active_runs: 8}\n")
    bench.spec("loads", dag="demo_tz", downstream="[warehouse]")
    forge.push(pull, "loosen and load")
    merged = forge.merge(pull, "merge")
    result = run(bench, forge.document(merged, review("bob", "approved", pull.head)))
    assert result.refused == [
        "loads: approval gate at reconcile: the approvals of #41 are not there: loads: the warehouse budget's owners "
        "(olga) have not approved the pull request"
    ]
    assert created(bench) == []


def test_an_approver_or_an_owner_who_authored_a_commit_does_not_approve(bench: Bench, forge: Forge) -> None:
    bench.policy(OWNED)
    forge.commit("warehouse owners")
    pull = forge.open("alice")
    bench.spec("loads", dag="demo_tz", downstream="[warehouse]")
    forge.push(pull, "add loads")
    (bench.specs / "loads.yaml").write_text((bench.specs / "loads.yaml").read_text() + "# bob's\n")
    forge.push(pull, "a commit of bob's", author="bob")
    (bench.specs / "loads.yaml").write_text((bench.specs / "loads.yaml").read_text() + "# olga's\n")
    forge.push(pull, "a commit of olga's", author="olga")
    merged = forge.merge(pull, "rebase")
    both = (review("bob", "approved", pull.head), review("olga", "approved", pull.head))
    result = run(bench, forge.document(merged, *both))
    assert result.refused == [
        "loads: approval gate at reconcile: the approvals of #41 are not there: loads: 'bob' authored a commit that "
        "added or changed this spec (bob@users.noreply.github.com) and cannot approve it; loads: the warehouse "
        "budget's owners (olga) have not approved the pull request; 'olga' authored a commit that added or changed "
        "this spec (olga@users.noreply.github.com) and cannot approve it; loads: 0 of the 1 approvals this spec "
        "needs are present"
    ]


REQUIRED = "version: 1\nrequire_reviewed_merge: true\n"
NO_REVIEW = (
    "no reviewed pull request for this change: specs/{name}.yaml in commit {sha} {how} (the policy requires a "
    "reviewed merge); re-run the reconcile of the merge that carried it, or `backfillctl reconcile --evidence FILE` "
    "with the evidence of that change (`backfillctl evidence needed` lists the commits; docs/ci-trust.md)"
)


def test_a_direct_push_under_require_reviewed_merge_is_refused_and_a_reducing_one_applied(
    bench: Bench, forge: Forge
) -> None:
    bench.policy(REQUIRED)
    forge.commit("require reviewed merges")
    pull = forge.open()
    bench.spec("reviewed", dag="demo_tz", end="2025-01-20")
    forge.push(pull, "add reviewed")
    merged = forge.merge(pull, "squash")
    assert bench.fake is not None
    bench.fake.scheduler_running = False  # the reviewed backfill stays running
    assert run(bench, forge.document(merged, review("bob", "approved", pull.head))).refused == []
    bench.spec("pushed")
    pushed = forge.commit("add pushed, on main")  # no pull request
    result = run(bench, forge.pushed(pushed))
    how = "was pushed without a pull request"
    assert result.refused == [f"pushed: {NO_REVIEW.format(name='pushed', sha=pushed[:12], how=how)}"]
    assert created(bench) == ["demo_tz"]
    assert [f.message for f in result.plan.findings if f.kind == "unreviewed-change"] == [
        f"specs/pushed.yaml changed in commit {pushed[:12]} without a pull request; what it starts is refused (a "
        "reviewed merge is required)"
    ]
    again = bench.run()  # no evidence at all: still refused, the commit still named
    assert again.refused == result.refused
    bench.spec("reviewed", dag="demo_tz", end="2025-01-20", state="paused")
    paused = forge.commit("pause reviewed, on main")
    reduced = run(bench, forge.pushed(paused))
    assert [(i.spec, i.kind) for i, _ in reduced.applied] == [("reviewed", Kind.PAUSE)]  # a reduction applies
    assert reduced.refused == result.refused
    assert f"specs/reviewed.yaml changed in commit {paused[:12]} without a pull request" in [
        f.message.split("; ")[0] for f in reduced.plan.findings if f.kind == "unreviewed-change"
    ]


def test_a_merge_whose_reconcile_never_ran_is_judged_by_its_own_evidence(bench: Bench, forge: Forge) -> None:
    bench.policy(REQUIRED)
    forge.commit("require reviewed merges")
    assert bench.run().applied == []  # the store's last reconciled commit
    first = forge.open()
    bench.spec("first", dag="demo_tz")
    forge.push(first, "add first")
    one = forge.merge(first, "merge")  # its reconcile run was cancelled by the next one (concurrency group)
    second = forge.open()
    bench.spec("second")
    forge.push(second, "add second")
    two = forge.merge(second, "merge")
    needed = _needed(bench)
    assert [c["sha"] for c in needed["commits"]] == [one.merge_sha, two.merge_sha]
    assert [c["paths"] for c in needed["commits"]] == [["specs/first.yaml"], ["specs/second.yaml"]]
    only_second = run(bench, forge.document(two, review("bob", "approved", second.head)))
    how = "has no evidence of a reviewed pull request"
    assert only_second.refused == [f"first: {NO_REVIEW.format(name='first', sha=one.merge_sha[:12], how=how)}"]
    assert created(bench) == ["demo_daily"]
    assert bench.run().refused == only_second.refused  # a pass without any evidence: refused still
    assert [c["sha"] for c in _needed(bench)["commits"]] == [one.merge_sha]  # still needs its evidence
    both = run(bench, forge.document(one, review("bob", "approved", first.head)))
    assert both.refused == []
    assert created(bench) == ["demo_daily", "demo_tz"]
    assert _needed(bench)["commits"] == []


def _needed(bench: Bench) -> dict[str, Any]:
    done = bench.cli("evidence", "needed")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_two_merges_of_a_merge_queue_in_one_push_each_by_its_own_evidence(bench: Bench, forge: Forge) -> None:
    first = forge.open()
    bench.spec("queued-one", dag="demo_tz")
    forge.push(first, "add queued-one")
    second = forge.open("bob")
    bench.spec("queued-two")
    forge.push(second, "add queued-two", author="bob")
    one = forge.merge(first, "merge")  # the queue merges each onto the one before, then moves main once
    two = forge.merge(second, "merge")
    assert one.merge_sha == forge.head("HEAD~1")
    result = run(
        bench,
        forge.document(one, review("bob", "approved", first.head)),
        forge.document(two, review("bob", "approved", second.head)),  # bob opened it: his approval is no approval
    )
    assert result.refused == [
        "queued-two: approval gate at reconcile: the approvals of #42 are not there: queued-two: 'bob' opened the "
        "pull request and cannot approve it; queued-two: 0 of the 1 approvals this spec needs are present"
    ]
    assert created(bench) == ["demo_tz"]


def test_evidence_that_could_not_be_fetched_holds_the_change_and_never_refuses_it(bench: Bench, forge: Forge) -> None:
    bench.policy(REQUIRED)
    forge.commit("require reviewed merges")
    pull = forge.open()
    bench.spec("held", dag="demo_tz")
    forge.push(pull, "add held")
    merged = forge.merge(pull, "merge")
    result = run(bench, unavailable=(merged.merge_sha,))
    (item,) = [i for i in result.plan.items if i.spec == "held"]
    assert (item.kind, item.phase.value, result.refused) == (Kind.WAIT, "Pending", [])
    assert item.reason == (
        f"held: the evidence of commit {merged.merge_sha[:12]} could not be fetched; decided again next pass"
    )
    assert created(bench) == []
    assert [c["sha"] for c in _needed(bench)["commits"]] == [merged.merge_sha]
    assert run(bench, forge.document(merged, review("bob", "approved", pull.head))).refused == []
    assert created(bench) == ["demo_tz"]


def test_a_force_push_allows_reductions_only_then_the_differing_specs_need_evidence(bench: Bench, forge: Forge) -> None:
    bench.spec("running", dag="demo_tz", end="2025-01-20")
    forge.commit("add running")
    assert bench.fake is not None
    bench.fake.scheduler_running = False
    assert [a[1] for a in bench.run().applied] == ["created"]
    reconciled = forge.head()
    git(bench.root, "reset", "-q", "--hard", "HEAD~1")  # history rewritten: the reconciled commit is gone from main
    bench.spec("running", dag="demo_tz", end="2025-01-20", state="paused")
    bench.spec("sneaked")
    rewritten = forge.commit("rewritten history")
    result = bench.run()
    assert [(i.spec, i.kind) for i, _ in result.applied] == [("running", Kind.PAUSE)]  # a reduction applies
    (sneaked,) = [i for i in result.plan.items if i.spec == "sneaked"]
    assert (sneaked.kind, sneaked.reason) == (
        Kind.WAIT,
        f"held: history was rewritten under the store (last reconciled {reconciled[:12]}); this pass applies "
        "reductions only",
    )
    assert [f.message for f in result.plan.findings if f.kind == "history-rewritten"] == [
        f"HEAD does not descend from the last reconciled commit {reconciled[:12]} (a force-push): this pass applies "
        "reductions only, and every spec that differs from that commit needs its evidence again"
    ]
    next_pass = bench.run()
    assert next_pass.refused == [
        f"sneaked: no reviewed pull request for this change: history was rewritten (HEAD does not descend from the "
        f"last reconciled commit {reconciled[:12]}), so specs/sneaked.yaml needs its evidence again; re-run the "
        "reconcile of the merge that carried it, or `backfillctl reconcile --evidence FILE` with the evidence of that "
        "change (`backfillctl evidence needed` lists the commits; docs/ci-trust.md)"
    ]
    assert created(bench) == ["demo_tz"]
    document = forge.pushed(rewritten)  # its evidence: pushed without a pull request, none required
    assert run(bench, document).refused == []
    assert created(bench) == ["demo_daily", "demo_tz"]


def test_a_resume_of_an_owners_stop_needs_an_owners_approval(bench: Bench, forge: Forge) -> None:
    bench.policy(OWNED)
    bench.spec("loads", dag="demo_tz", end="2025-01-20", downstream="[warehouse]")
    forge.commit("add loads")
    assert bench.fake is not None
    bench.fake.scheduler_running = False
    bench.run()
    stop = bench.store.add_stop(EmergencyStopKind.DOWNSTREAM, "warehouse", "CPU at 95%", "olga", source=StopSource.CLI)
    assert [(i.kind, o) for i, o in bench.run().applied] == [(Kind.PAUSE, "done")]
    pull = forge.open("alice")
    resume = f'"stop #{stop.id}: warehouse recovered"'
    bench.spec("loads", dag="demo_tz", end="2025-01-20", downstream="[warehouse]", resume=resume)
    forge.push(pull, "resume loads")
    merged = forge.merge(pull, "squash")
    unowned = forge.document(
        merged, review("bob", "approved", pull.head), review("olga", "changes_requested", pull.head)
    )
    refused = run(bench, unowned)
    assert refused.refused == [
        "loads: approval gate at reconcile: the approvals of #41 are not there: loads: the warehouse budget's owners "
        "(olga) have not approved the pull request; loads: its resume lifts stop #1 of downstream warehouse, and none "
        "of its owners (olga) approved the pull request"
    ]
    assert [s.id for s in bench.store.stops()] == [stop.id]  # not lifted
    assert bench.fake.backfills[1]["is_paused"] is True
    later = bench.run()  # a later pass without the evidence: the store kept the refusal, the stop holds
    assert (later.refused, [s.id for s in bench.store.stops()]) == (refused.refused, [stop.id])
    assert [f.message for f in refused.plan.findings if f.kind == "approval-gate"] == [refused.refused[0][7:]]
    owned = forge.document(
        merged,
        review("bob", "approved", pull.head),
        review("olga", "approved", pull.head, at="2026-11-01T11:00:00Z"),
        name="pr-41-again.json",
    )
    lifted = run(bench, owned)
    assert (lifted.refused, bench.store.stops()) == ([], ())
    assert [(i.kind, o) for i, o in lifted.applied] == [(Kind.UNPAUSE, "done")]
    assert bench.fake.backfills[1]["is_paused"] is False


def test_a_review_without_a_reviewer_is_skipped_with_a_warning_and_logins_ignore_letter_case(
    bench: Bench, forge: Forge, caplog: pytest.LogCaptureFixture
) -> None:
    bench.policy(OWNED.replace("owners: [olga]", "owners: [Olga]"))
    forge.commit("warehouse owners")
    pull = forge.open("Alice")
    bench.spec("loads", dag="demo_tz", downstream="[warehouse]")
    forge.push(pull, "add loads")
    merged = forge.merge(pull, "merge")
    document = forge.document(
        merged,
        review(None, "approved", pull.head),  # a deleted account
        review("BOB", "approved", pull.head),  # the spec lists `bob`
        review("olga", "approved", pull.head),  # the policy says `Olga`
        review("ALICE", "approved", pull.head),  # the pull request's author, `Alice`: never counts
    )
    with caplog.at_level("WARNING"):
        result = run(bench, document)
    assert result.refused == []
    assert created(bench) == ["demo_tz"]
    assert caplog.messages == [f"{document}: $.reviews[0]: a review without a reviewer (a deleted account) is skipped"]
    approval = bench.store.bindings()["loads"].approval
    assert approval is not None
    assert [r.login for r in approval.reviews] == ["BOB", "olga"]


def test_the_deprecated_flags_still_gate_and_say_the_head_sha_is_not_checked(
    bench: Bench, forge: Forge, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pull = forge.open()
    bench.spec("old-style", dag="demo_tz")
    forge.push(pull, "add old-style")
    forge.merge(pull, "merge")
    reviews = bench.root / "evidence" / "reviews.json"
    github = {"id": 7, "user": None, "state": "APPROVED", "commit_id": "0" * 40, "submitted_at": "2026-11-01T09:00:00Z"}
    stale = {**github, "id": 8, "user": {"login": "bob"}, "permission": "write"}  # of another commit: counts here
    reviews.write_text(json.dumps([[github, stale]]))
    in_process(bench, monkeypatch)
    monkeypatch.chdir(bench.root)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    code = main(["reconcile", "--pr-reviews", str(reviews), "--pr-number", "41", "--pr-author", "alice"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (
        "--pr-reviews, --pr-number and --pr-author are deprecated and go away in the next release: pass the merged "
        "change's evidence document with --evidence FILE (docs/ci-trust.md). They stand for HEAD's merge onto its "
        "first parent, and the head SHA is not checked: an approval of any commit of the pull request counts"
    ) in err
    assert "$[0]: warning: a review without a reviewer (GitHub names none for a deleted account) is skipped" in err
    assert created(bench) == ["demo_tz"]
    approval = bench.store.bindings()["old-style"].approval
    assert approval is not None
    assert (approval.pr_number, approval.head_sha, [r.login for r in approval.reviews]) == (41, None, ["bob"])
