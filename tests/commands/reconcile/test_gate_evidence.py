"""The evidence documents and what is said of the gate's decisions, in a real git repository on the fake Airflow:
`evidence check` (a located error, exit 1), a document whose commits are not this branch's (exit 1), a head the
clone lacks (held), `evidence needed` on a store that reconciled nothing, and the refusal as `status` and the
change record say it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main
from controller.commands.reconcile.evidence import read_document
from controller.commands.reconcile.gate import EvidenceGiven
from controller.errors import ConfigError
from tests.commands.reconcile.forge import Forge, git, review
from tests.commands.reconcile.harness import Bench, in_process


@pytest.fixture
def forge(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> Forge:
    made = Forge(bench)
    bench.policy("version: 1\nrequire_reviewed_merge: false\n")
    made.commit("policy")
    in_process(bench, monkeypatch)
    monkeypatch.chdir(bench.root)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    return made


def merged_spec(bench: Bench, forge: Forge, name: str = "one", method: str = "squash") -> Any:
    pull = forge.open()
    bench.spec(name, dag="demo_tz")
    forge.push(pull, f"add {name}")
    return pull, forge.merge(pull, method)


def test_evidence_check_prints_what_a_document_says_or_the_first_error_with_its_json_path(
    bench: Bench, forge: Forge, capsys: pytest.CaptureFixture[str]
) -> None:
    pull, merged = merged_spec(bench, forge)
    good = forge.document(merged, review("bob", "approved", pull.head), review(None, "commented", pull.head))
    assert main(["evidence", "check", str(good)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "version": 1,
        "source": "evidence/pr-41.json",
        "commit": merged.merge_sha,
        "change": {
            "number": 41,
            "base_sha": merged.base_sha,
            "head_sha": pull.head,
            "merge_sha": merged.merge_sha,
            "merge_method": "squash",
        },
        "reviews": 1,
        "approved_by": ["bob"],
    }
    data = json.loads(good.read_text())
    data["reviews"][0]["state"] = "APPROVED"
    data["change"]["head_sha"] = "HEAD"
    bad = forge.write("bad.json", data)
    assert main(["evidence", "check", str(bad)]) == 1
    assert capsys.readouterr().err == (
        "error: evidence/bad.json: $.change.head_sha: 'HEAD' does not match '^[0-9a-f]{40}([0-9a-f]{24})?$'\n"
        "  evidence/bad.json: $.reviews[0].state: 'APPROVED' is not one of ['approved', 'changes_requested', "
        "'commented', 'dismissed']\n"
        "  hint: write it as docs/ci-trust.md shows (`gh api` for the commit's pull request, its reviews and each "
        "reviewer's permission), and check it with `backfillctl evidence check FILE`\n"
    )
    (bench.root / "evidence" / "broken.json").write_text('{"version": 1,\n  "forge": }')
    assert main(["evidence", "check", "evidence/broken.json"]) == 1
    assert capsys.readouterr().err.startswith("error: evidence/broken.json:2:12: not valid JSON: Expecting value\n")
    pushed = forge.write("pushed.json", {"version": 1, "forge": "github", "change": None, "reviews": []})
    assert main(["evidence", "check", str(pushed)]) == 1
    assert capsys.readouterr().err.startswith("error: evidence/pushed.json: $: 'commit' is a required property\n")


def test_a_document_of_another_branch_is_refused_naming_it(bench: Bench, forge: Forge) -> None:
    pull, merged = merged_spec(bench, forge)
    git(bench.root, "checkout", "-q", "-b", "elsewhere", "main~1")
    bench.spec("other", dag="demo_tz")
    other = forge.commit("another branch")
    git(bench.root, "checkout", "-q", "main")
    data = json.loads(forge.document(merged, review("bob", "approved", pull.head)).read_text())
    data["change"]["merge_sha"] = other
    wrong = forge.write("wrong.json", data)
    reconciler = bench.reconciler()
    reconciler.evidence = EvidenceGiven((read_document(wrong),))
    with pytest.raises(ConfigError) as raised:
        reconciler.run_once()
    assert raised.value.message == (
        f"evidence/wrong.json: $.change.merge_sha: commit {other} is not in the history of HEAD {merged.merge_sha[:12]}"
    )
    data["change"]["merge_sha"] = "f" * 40
    missing = forge.write("missing.json", data)
    reconciler.evidence = EvidenceGiven((read_document(missing),))
    with pytest.raises(Exception, match=f"evidence/missing.json: \\$.change.merge_sha: commit {'f' * 40} is not in"):
        reconciler.run_once()


def test_a_head_the_clone_lacks_holds_the_change(bench: Bench, forge: Forge) -> None:
    pull, merged = merged_spec(bench, forge)
    git(bench.root, "branch", "-q", "-D", pull.branch)
    git(bench.root, "reflog", "expire", "--expire=now", "--all")
    git(bench.root, "gc", "-q", "--prune=now")  # the squashed pull request's own commits are gone from the clone
    reconciler = bench.reconciler()
    reconciler.evidence = EvidenceGiven((read_document(forge.document(merged, review("bob", "approved", pull.head))),))
    result = reconciler.run_once()
    (item,) = [i for i in result.plan.items if i.spec == "one"]
    assert (item.kind.value, result.refused) == ("wait", [])
    assert item.reason == (
        f"held: the commits of #41 (up to its head {pull.head[:12]}) are not in this clone, so who authored them is "
        "not known; fetch them (git fetch origin refs/pull/41/head); decided again next pass"
    )


def test_evidence_needed_on_a_store_that_reconciled_nothing_lists_each_files_last_commit(
    bench: Bench, forge: Forge, capsys: pytest.CaptureFixture[str]
) -> None:
    first, one = merged_spec(bench, forge, "one")
    _, two = merged_spec(bench, forge, "two", method="rebase")
    assert main(["evidence", "needed"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found == {
        "format_version": 1,
        "head": two.merge_sha,
        "last_reconciled": None,
        "history_rewritten": False,
        "commits": [
            {"sha": one.merge_sha, "paths": ["specs/one.yaml"]},
            {"sha": two.merge_sha, "paths": ["specs/two.yaml"]},
        ],
    }
    assert first.number == 41


def test_evidence_needed_before_the_first_reconcile_made_the_store_lists_every_spec(
    bench: Bench, forge: Forge, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, one = merged_spec(bench, forge, "one")
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", f"sqlite:///{tmp_path}/not-yet.db")  # the workflow's first run
    assert main(["evidence", "needed"]) == 0
    out, err = capsys.readouterr()
    assert [c["sha"] for c in json.loads(out)["commits"]] == [one.merge_sha]
    assert err[21:] == (  # after its time; the store's URL is a secret, never shown
        "warning: no store at [secure]; reconcile creates it: every spec's change needs evidence\n"
    )
    assert not (tmp_path / "not-yet.db").exists()  # a read-only command creates nothing


def test_status_and_the_change_record_say_why_and_name_the_change(
    bench: Bench, forge: Forge, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench.policy("version: 1\nrequire_reviewed_merge: true\n")
    forge.commit("require reviewed merges")
    assert main(["reconcile", "--once"]) == 0
    bench.spec("pushed", dag="demo_daily")
    pushed = forge.commit("pushed on main")
    assert main(["reconcile", "--once"]) == 5
    capsys.readouterr()
    assert main(["status", "pushed"]) == 0
    out = capsys.readouterr().out
    assert "no reviewed pull request for this change: specs/pushed.yaml in commit" in out.replace("\n", " ")
    assert pushed[:12] in out
    pull, merged = merged_spec(bench, forge, "reviewed")
    document = forge.document(merged, review("bob", "approved", pull.head))
    assert main(["reconcile", "--once", "--evidence", str(document)]) == 5  # `pushed` is refused still
    capsys.readouterr()
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL")  # the change record as the store keeps it (no Airflow read)
    assert main(["report", "reviewed", "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    (change,) = record["approved_changes"]
    assert change == {
        "pr_number": 41,
        "merged_commit": merged.merge_sha,
        "url": "https://github.com/acme/specs/pull/41",
        "base_sha": merged.base_sha,
        "head_sha": pull.head,
        "policy_blob": git(bench.root, "rev-parse", f"{merged.base_sha}:specs/policy.yaml"),
        "reviews": [
            {
                "login": "bob",
                "review_id": change["reviews"][0]["review_id"],
                "commit_id": pull.head,
                "submitted_at": "2026-11-01T10:00:00Z",
            }
        ],
    }
    assert main(["report", "reviewed"]) == 0
    policy = change["policy_blob"][:12]
    assert (
        f"- **Approved change**: \\#41 https://github.com/acme/specs/pull/41: base {merged.base_sha[:12]}, head "
        f"{pull.head[:12]}, merged as {merged.merge_sha[:12]}; policy {policy}; reviews that counted: bob \\(review "
        f"{change['reviews'][0]['review_id']}, commit {pull.head[:12]}\\)"
    ) in capsys.readouterr().out


def test_validate_at_pr_time_counts_no_owner_who_authored_a_commit(
    bench: Bench, forge: Forge, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench.policy(
        "version: 1\nrequire_reviewed_merge: false\ndownstream:\n  warehouse: {max_active_runs: 8, owners: [olga]}\n"
    )
    forge.commit("owners")
    pull = forge.open()
    bench.spec("loads", dag="demo_tz", downstream="[warehouse]")
    forge.push(pull, "add loads", author="Olga")
    assert main(["validate", "--base", "main"]) == 1
    out = capsys.readouterr().out
    assert (
        "specs/loads.yaml:12:14: $.downstream[0]: every owner of the warehouse budget (olga) authored a commit that "
        "added or changed this spec: none of them can approve it"
    ) in out
    reviews = tmp_path / "reviews.json"
    github = {"id": 1, "state": "APPROVED", "commit_id": pull.head, "submitted_at": "2026-11-01T10:00:00Z"}
    reviews.write_text(
        json.dumps([{**github, "user": {"login": who}, "permission": "write"} for who in ("bob", "olga")])
    )
    args = ["validate", "--base", "main", "--pr-reviews", str(reviews), "--pr-author", "alice", "--head-sha", pull.head]
    assert main(args) == 1
    assert (
        "$.downstream[0]: loads: the warehouse budget's owners (olga) have not approved the pull request; 'olga' "
        "authored a commit that added or changed this spec (olga@users.noreply.github.com) and cannot approve it"
    ) in capsys.readouterr().out
