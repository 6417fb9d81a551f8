"""The change record's words for who approved a spec, their JSON in the binding, and the approval gate at reconcile
(pure): each file's decision (`assess`), and what it does to what would start work (`gate_plan`, `resumable`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.core.model.airflow import BackfillRequest
from controller.core.model.binding import Approval, ApprovedReview, Binding, Phase
from controller.core.model.evidence import (
    Evidence,
    ForgeReview,
    GateDecision,
    MergedChange,
    MergeMethod,
    ReviewState,
    Verdict,
)
from controller.core.model.guards import Budget
from controller.core.model.policy import Policy
from controller.core.model.stops import EmergencyStop, EmergencyStopKind, StopSource
from controller.core.plan.provenance import (
    Carried,
    Gate,
    approval_clause,
    approved_by,
    assess,
    gate_plan,
    resumable,
)
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan
from tests.core.specs import loaded, text

BOB = ApprovedReview("bob", 9001, "c0ffee", "2026-11-01T10:00:00Z")
ERIN = ApprovedReview("erin", None, "", "")


@pytest.mark.parametrize(
    ("approval", "words"),
    [
        (Approval(41, "abc", (BOB,)), "bob in #41 (review 9001, 2026-11-01T10:00Z)"),
        (
            Approval(41, None, (BOB, ERIN)),
            "bob in #41 (review 9001, 2026-11-01T10:00Z), erin in #41 (review id unknown, time unknown)",
        ),
        (None, "approval not recorded (the spec lists bob, carol)"),
    ],
)
def test_approved_by_names_each_review_or_says_there_is_no_record(approval: Approval | None, words: str) -> None:
    assert approved_by(approval, ("bob", "carol")) == words
    assert approval_clause(approval, ("bob", "carol")) == (words if approval is None else f"approved by {words}")


def test_an_approval_survives_the_bindings_json_and_names_its_change() -> None:
    approval = Approval(41, "abc", (BOB, ERIN))
    assert Approval.from_json(approval.as_json()) == approval
    assert set(approval.as_json()) == {"pr_number", "merged_commit", "reviews"}  # an older record's shape
    full = Approval(41, "m" * 40, (BOB,), "https://x/pull/41", "b" * 40, "h" * 40, "")
    assert Approval.from_json(full.as_json()) == full
    assert full.change_text() == (
        "#41 https://x/pull/41: base bbbbbbbbbbbb, head hhhhhhhhhhhh, merged as mmmmmmmmmmmm; policy none (the default)"
    )
    assert (
        replace(full, policy_blob="p" * 40, url="")
        .change_text()
        .endswith(": base bbbbbbbbbbbb, head hhhhhhhhhhhh, merged as mmmmmmmmmmmm; policy pppppppppppp")
    )
    assert Approval(7, None, ()).change_text() == "#7: commits not recorded"
    assert Approval.from_json(None) is None
    assert (
        ApprovedReview("x", 1, "", "2026-11-01T10:00:00.123Z").text(7) == "x in #7 (review 1, 2026-11-01T10:00:00.123Z)"
    )


# --- deciding each file (assess) -------------------------------------------------------------------------------

PATH, BLOB, OTHER_BLOB = "specs/s.yaml", "b" * 40, "c" * 40
POLICY_PATH = "specs/policy.yaml"
BASE, HEAD_SHA, MERGE = "1" * 40, "2" * 40, "3" * 40
WAREHOUSE = Policy(downstream=(Budget("warehouse", 8, ("olga", "pete")),))
SPEC = loaded(text(approvers="dave, erin") + "downstream: [warehouse]\n")


def forge_review(login: str | None, state: str = "approved", commit: str = HEAD_SHA, **more: Any) -> ForgeReview:
    fields: dict[str, Any] = {"permission": "write", "submitted_at": "2026-11-01T10:00:00Z"} | more
    return ForgeReview(fields.pop("review_id", 1), login or "", ReviewState(state), commit, **fields)


ALL = tuple(forge_review(who) for who in ("dave", "erin", "olga"))


def evidence(*reviews: ForgeReview, author: str = "bob", head: str | None = HEAD_SHA) -> Evidence:
    change = MergedChange(41, "https://x/pull/41", author, BASE, head, MERGE, MergeMethod.REBASE)
    return Evidence("github", MERGE, change, reviews, "pr.json")


def carried(
    found: Evidence | None = None,
    *,
    files: dict[str, str] | None = None,
    authors: dict[str, tuple[str, ...]] | None = None,
    policy: Policy = WAREHOUSE,
    order: int = 5,
    commit: str = MERGE,
) -> Carried:
    return Carried(commit, files or {PATH: BLOB}, found, policy, "p" * 40, {} if authors is None else authors, order)


def gate(*carriers: Carried, **fields: Any) -> Gate:
    made = Gate({PATH: BLOB}, {"s": PATH}, changed=frozenset({PATH}), carried=carriers, loaded={"s": SPEC})
    return replace(made, **fields)


def decided(found: Gate) -> tuple[Verdict, str] | None:
    decision = assess(found).get(PATH)
    return None if decision is None else (decision.verdict, decision.reason)


def test_a_change_approved_at_its_head_is_approved_with_each_counted_review() -> None:
    (decision,) = assess(gate(carried(evidence(*ALL)))).values()
    assert decision == GateDecision(
        PATH,
        BLOB,
        Verdict.APPROVED,
        "",
        Approval(
            41,
            MERGE,
            (
                ApprovedReview("dave", 1, HEAD_SHA, "2026-11-01T10:00:00Z"),
                ApprovedReview("erin", 1, HEAD_SHA, "2026-11-01T10:00:00Z"),
                ApprovedReview("olga", 1, HEAD_SHA, "2026-11-01T10:00:00Z"),
            ),
            "https://x/pull/41",
            BASE,
            HEAD_SHA,
            "p" * 40,
        ),
        "p" * 40,
        MERGE,
    )


UNAPPROVED = "approval gate at reconcile: the approvals of #41 are not there: "


@pytest.mark.parametrize(
    ("reviews", "fields", "why"),
    [
        (
            (forge_review("dave", commit=BASE), *ALL[1:]),
            {},
            f"s: 'dave' approved commit {BASE[:12]}, not the pull request's head {HEAD_SHA[:12]}",
        ),
        ((forge_review("dave", permission="read"), *ALL[1:]), {}, "s: 'dave' approved, but the review is ignored"),
        ((forge_review("dave", "changes_requested"), *ALL[1:]), {}, "s: 'dave' has not approved the pull request "),
        (ALL, {"author": "Dave"}, "s: 'dave' opened the pull request and cannot approve it"),
        (ALL[:2], {}, "s: the warehouse budget's owners (olga, pete) have not approved the pull request"),
    ],
)
def test_a_change_without_its_approvals_is_refused_saying_why(
    reviews: tuple[ForgeReview, ...], fields: dict[str, Any], why: str
) -> None:
    found = decided(gate(carried(evidence(*reviews, **fields))))
    assert found is not None
    assert found[0] is Verdict.REFUSED
    assert found[1].startswith(UNAPPROVED + why)


def test_without_a_head_sha_any_commits_approval_counts() -> None:
    old = tuple(forge_review(who, commit=BASE) for who in ("dave", "erin", "olga"))
    assert decided(gate(carried(evidence(*old, head=None)))) == (Verdict.APPROVED, "")


def test_the_authors_of_the_changes_commits_approve_nothing_of_what_they_touched() -> None:
    authors = {PATH: ("dave@users.noreply.github.com",), "specs/other.yaml": ("erin@users.noreply.github.com",)}
    found = decided(gate(carried(evidence(*ALL), authors=authors)))
    assert found == (
        Verdict.REFUSED,
        UNAPPROVED + "s: 'dave' authored a commit that added or changed this spec (dave@users.noreply.github.com) "
        "and cannot approve it",
    )
    owner = {PATH: ("olga@users.noreply.github.com",)}
    assert decided(gate(carried(evidence(*ALL), authors=owner))) == (
        Verdict.REFUSED,
        UNAPPROVED + "s: the warehouse budget's owners (olga, pete) have not approved the pull request; 'olga' "
        "authored a commit that added or changed this spec (olga@users.noreply.github.com) and cannot approve it",
    )
    pete = (*ALL, forge_review("pete"))
    assert decided(gate(carried(evidence(*pete), authors=owner))) == (Verdict.APPROVED, "")  # another owner did


def test_the_commits_of_a_change_not_in_the_clone_hold_it() -> None:
    assert decided(gate(replace(carried(evidence(*ALL)), authors=None))) == (
        Verdict.HELD,
        f"held: the commits of #41 (up to its head {HEAD_SHA[:12]}) are not in this clone, so who authored them is "
        "not known; fetch them (git fetch origin refs/pull/41/head); decided again next pass",
    )
    headless = replace(carried(evidence(*ALL, head=None)), authors=None)
    found = decided(gate(headless))
    assert found is not None
    assert f"up to its head {MERGE[:12]}" in found[1]


def test_a_direct_push_goes_on_flagged_or_is_unreviewed_where_a_reviewed_merge_is_required() -> None:
    pushed = Evidence("github", MERGE, None, (), "push.json")
    (free,) = assess(gate(carried(pushed))).values()
    assert (free.verdict, free.direct, free.commit) == (Verdict.PUSHED, True, MERGE)
    (required,) = assess(gate(carried(pushed), require=True)).values()
    assert (required.verdict, required.direct) == (Verdict.UNREVIEWED, True)
    assert required.reason == (
        f"no reviewed pull request for this change: {PATH} in commit {MERGE[:12]} was pushed without a pull request "
        "(the policy requires a reviewed merge); re-run the reconcile of the merge that carried it, or `backfillctl "
        "reconcile --evidence FILE` with the evidence of that change (`backfillctl evidence needed` lists the "
        "commits; docs/ci-trust.md)"
    )


def test_the_latest_change_carrying_this_version_decides_and_only_this_version() -> None:
    early = carried(evidence(forge_review("dave")), order=1)
    late = carried(evidence(*ALL), order=9)
    assert decided(gate(late, early)) == (Verdict.APPROVED, "")
    assert decided(gate(early, late)) == (Verdict.APPROVED, "")
    assert decided(gate(replace(late, files={PATH: OTHER_BLOB}), early))[0] is Verdict.REFUSED  # type: ignore[index]
    assert decided(gate(replace(late, files={"specs/other.yaml": BLOB}))) is None  # another file's change
    outage = carried(None, order=9)
    assert decided(gate(outage, late)) == (Verdict.APPROVED, "")  # at one place: the evidence, not the outage
    assert decided(gate(replace(outage, order=10), late))[0] is Verdict.HELD  # type: ignore[index]


KEPT = GateDecision(PATH, BLOB, Verdict.APPROVED, approval=Approval(40, MERGE, ()))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, None),  # changed, no evidence, none required: goes on as before
        ({"recorded": {PATH: KEPT}}, (Verdict.APPROVED, "")),  # approved before: reused
        ({"recorded": {PATH: replace(KEPT, blob=OTHER_BLOB)}}, None),  # another version's
        ({"changed": frozenset(), "recorded": {PATH: KEPT}}, (Verdict.APPROVED, "")),
        ({"changed": frozenset(), "require": True}, None),  # as at the last reconciled commit
        (
            {"changed": frozenset(), "recorded": {PATH: replace(KEPT, verdict=Verdict.REFUSED, reason="no")}},
            (Verdict.REFUSED, "no"),
        ),  # refused until the file changes
        (
            {"changed": frozenset(), "recorded": {PATH: replace(KEPT, verdict=Verdict.UNREVIEWED, reason="no")}},
            (Verdict.UNREVIEWED, "no"),
        ),  # a requirement dropped since does not lift it
        ({"changed": frozenset(), "recorded": {PATH: replace(KEPT, verdict=Verdict.HELD, reason="x")}}, None),
        (
            {"changed": frozenset(), "require": True, "recorded": {PATH: replace(KEPT, verdict=Verdict.HELD)}},
            (Verdict.UNREVIEWED, f"no reviewed pull request for this change: {PATH} has no evidence"),
        ),
    ],
)
def test_without_evidence_a_kept_decision_or_the_requirement_decides(
    fields: dict[str, Any], expected: tuple[Verdict, str] | None
) -> None:
    found = decided(gate(**fields))
    if expected is None or found is None:
        assert found == expected
    else:
        assert (found[0], found[1][: len(expected[1])]) == expected


def test_a_required_review_names_the_commit_that_carried_the_change() -> None:
    found = assess(gate(require=True, carriers={PATH: MERGE}))[PATH]
    assert (found.verdict, found.commit) == (Verdict.UNREVIEWED, MERGE)
    assert found.reason.startswith(f"no reviewed pull request for this change: {PATH} in commit {MERGE[:12]} has no ")


def test_a_rewritten_history_needs_the_evidence_again_even_of_a_version_approved_before() -> None:
    rewritten = gate(rewritten="9" * 40, recorded={PATH: KEPT})
    assert decided(rewritten) == (
        Verdict.UNREVIEWED,
        f"no reviewed pull request for this change: history was rewritten (HEAD does not descend from the last "
        f"reconciled commit 999999999999), so {PATH} needs its evidence again; re-run the reconcile of the merge "
        "that carried it, or `backfillctl reconcile --evidence FILE` with the evidence of that change (`backfillctl "
        "evidence needed` lists the commits; docs/ci-trust.md)",
    )
    assert decided(replace(rewritten, changed=frozenset())) == (Verdict.APPROVED, "")  # the same as before it
    assert decided(replace(rewritten, carried=(carried(evidence(*ALL)),))) == (Verdict.APPROVED, "")


def test_the_policy_is_judged_only_where_a_reviewed_merge_is_required() -> None:
    files = {PATH: BLOB, POLICY_PATH: OTHER_BLOB}
    change = carried(evidence(forge_review("mallory")), files={POLICY_PATH: OTHER_BLOB})
    free = gate(change, files=files, policy_path=POLICY_PATH, changed=frozenset({POLICY_PATH}))
    assert assess(free) == {}
    required = replace(free, require=True)
    assert assess(required)[POLICY_PATH].verdict is Verdict.APPROVED  # one approval that counts, whoever gave it
    own = replace(required, carried=(carried(evidence(forge_review("bob")), files={POLICY_PATH: OTHER_BLOB}),))
    assert (assess(own)[POLICY_PATH].verdict, assess(own)[POLICY_PATH].reason) == (
        Verdict.REFUSED,
        UNAPPROVED + f"{POLICY_PATH}: no approval of the pull request counts",
    )
    assert assess(replace(required, carried=()))[POLICY_PATH].verdict is Verdict.UNREVIEWED


def test_a_file_that_is_no_valid_spec_now_is_not_decided() -> None:
    assert assess(gate(carried(evidence(*ALL)), paths={})) == {}


NOW = datetime(2026, 11, 1, tzinfo=UTC)


def stop(kind: EmergencyStopKind = EmergencyStopKind.DOWNSTREAM, target: str = "warehouse") -> EmergencyStop:
    return EmergencyStop(3, kind, target, "CPU at 95%", "olga", StopSource.CLI, NOW)


RESUMING = loaded(text(approvers="dave") + 'downstream: [warehouse]\nresume: "stop #3: recovered"\n')


def test_a_resume_naming_an_owners_stop_needs_an_owners_approval() -> None:
    reviews = (forge_review("dave"), forge_review("pete"))  # pete owns warehouse too, but not the lake
    lake = Policy(downstream=(Budget("warehouse", 8, ("olga", "pete")), Budget("lake", 2, ("lena",))))
    held = gate(carried(evidence(*reviews), policy=lake), loaded={"s": RESUMING}, specs=(RESUMING.spec,))
    assert decided(replace(held, stops=(stop(),))) == (Verdict.APPROVED, "")
    assert decided(replace(held, stops=(stop(EmergencyStopKind.DOWNSTREAM, "lake"),))) == (Verdict.APPROVED, "")
    only_dave = replace(held, carried=(carried(evidence(forge_review("dave")), policy=lake),))
    found = decided(replace(only_dave, stops=(stop(),)))
    assert found is not None
    assert found[1].endswith(
        "s: its resume lifts stop #3 of downstream warehouse, and none of its owners (olga, pete) approved the pull "
        "request"
    )
    for unnamed in (replace(stop(), id=4), stop(EmergencyStopKind.SPEC, "other")):
        assert decided(replace(only_dave, stops=(unnamed,)))[0] is Verdict.REFUSED  # type: ignore[index]
    ownerless = replace(
        only_dave,
        stops=(stop(EmergencyStopKind.SPEC, "s"),),
        carried=(carried(evidence(forge_review("dave")), policy=Policy()),),
    )
    assert decided(ownerless) == (Verdict.APPROVED, "")  # no owner to ask: the spec's approvers lift it


# --- applying the decisions (gate_plan) ----------------------------------------------------------------------


def item(kind: Kind = Kind.CREATE, **fields: Any) -> Item:
    spec = SPEC.spec
    request = BackfillRequest.from_spec(spec)
    return replace(Item("s", spec.dag_id, kind, Phase.PENDING, source=spec, request=request), **fields)


def apply(plan: Plan, decision: GateDecision | None, **fields: Any) -> tuple[Plan, dict[str, Approval]]:
    found = replace(gate(), **fields)
    return gate_plan(plan, found, {} if decision is None else {PATH: decision})


REFUSED = GateDecision(PATH, BLOB, Verdict.REFUSED, "approval gate at reconcile: nope")
HELD = GateDecision(PATH, BLOB, Verdict.HELD, "held: outage")


def test_an_approved_change_goes_on_and_hands_its_approval_to_the_create() -> None:
    plan = Plan((item(),))
    gated, approvals = apply(plan, KEPT)
    assert (gated.items, approvals) == (plan.items, {"s": KEPT.approval})
    assert gated.checksum() == plan.checksum()


@pytest.mark.parametrize("kind", [Kind.CREATE, Kind.WAIT])
def test_a_refused_first_create_is_the_specs_blocked_phase(kind: Kind) -> None:
    gated = apply(Plan((item(kind, awaiting_dry_run=True),)), REFUSED)[0]
    (refused,) = gated.items
    assert (refused.kind, refused.phase, refused.reason, refused.request, refused.awaiting_dry_run) == (
        Kind.REFUSE,
        Phase.BLOCKED,
        "approval gate at reconcile: nope",
        None,
        False,
    )
    assert (refused.approval_refused, refused.held, gated.findings) == (True, None, ())
    assert gated.checksum() == Plan((item(kind, awaiting_dry_run=True),)).checksum()  # the gate only takes away


def test_a_refused_restart_of_a_spec_with_backfills_keeps_its_phase_and_is_said_as_a_finding() -> None:
    bound = Binding("s", "orders_daily", 7, Phase.PAUSED, backfills=(7,))
    unpause = item(Kind.UNPAUSE, phase=Phase.RUNNING, backfill_id=7)
    gated = apply(Plan((unpause,)), REFUSED, bindings={"s": bound})[0]
    (refused,) = gated.items
    assert (refused.kind, refused.phase, refused.held) == (Kind.REFUSE, Phase.RUNNING, unpause)
    assert gated.findings == (Finding(FindingKind.APPROVAL_GATE, "orders_daily", REFUSED.reason, "s", 7),)


@pytest.mark.parametrize(("kind", "phase"), [(Kind.CREATE, Phase.PENDING), (Kind.UNPAUSE, Phase.PAUSED)])
def test_a_held_start_waits_saying_why(kind: Kind, phase: Phase) -> None:
    planned = item(kind, phase=Phase.RUNNING)
    gated = apply(Plan((planned,)), HELD)[0]
    (held,) = gated.items
    assert (held.kind, held.phase, held.reason, held.request, held.held) == (
        Kind.WAIT,
        phase,
        "held: outage",
        None,
        planned,
    )
    assert [f.kind for f in gated.findings] == [FindingKind.APPROVAL_GATE]


@pytest.mark.parametrize("kind", [Kind.PAUSE, Kind.CANCEL, Kind.NOOP, Kind.ADOPT, Kind.REFUSE, Kind.BLOCKED])
def test_reductions_and_what_is_settled_are_never_held(kind: Kind) -> None:
    plan = Plan((item(kind),))
    for decision in (REFUSED, HELD):
        assert apply(plan, decision)[0].items == plan.items
        assert apply(plan, decision, rewritten="9" * 40)[0].items == plan.items
    orphan = Plan((item(source=None),))
    assert apply(orphan, REFUSED)[0].items == orphan.items


def test_a_policy_change_that_is_not_reviewed_holds_every_start() -> None:
    unreviewed = GateDecision(POLICY_PATH, OTHER_BLOB, Verdict.UNREVIEWED, "no reviewed pull request: policy")
    found = replace(gate(), policy_path=POLICY_PATH)
    gated = gate_plan(Plan((item(),)), found, {POLICY_PATH: unreviewed})[0]
    assert (gated.items[0].kind, gated.items[0].reason) == (Kind.REFUSE, "no reviewed pull request: policy")
    approved = replace(unreviewed, verdict=Verdict.APPROVED)
    assert gate_plan(Plan((item(),)), found, {POLICY_PATH: approved})[0].items == (item(),)


def test_a_rewritten_history_holds_every_start_once_and_says_it() -> None:
    gated = apply(Plan((item(), item(Kind.PAUSE, spec="t"))), KEPT, rewritten="9" * 40)[0]
    assert [(i.kind, i.reason) for i in gated.items] == [
        (
            Kind.WAIT,
            "held: history was rewritten under the store (last reconciled 999999999999); this pass applies "
            "reductions only",
        ),
        (Kind.PAUSE, ""),
    ]
    assert [f.kind for f in gated.findings] == [FindingKind.HISTORY_REWRITTEN]


def test_a_direct_push_is_said_once_applied_or_refused() -> None:
    pushed = GateDecision(PATH, BLOB, Verdict.PUSHED, "x", commit=MERGE, direct=True)
    (finding,) = apply(Plan((item(Kind.PAUSE),)), pushed)[0].findings
    assert (finding.kind, finding.spec, finding.message) == (
        FindingKind.UNREVIEWED_CHANGE,
        "s",
        f"{PATH} changed in commit {MERGE[:12]} without a pull request; applied",
    )
    refused = replace(pushed, verdict=Verdict.UNREVIEWED)
    assert (
        apply(Plan((item(Kind.PAUSE),)), refused)[0]
        .findings[0]
        .message.endswith("what it starts is refused (a reviewed merge is required)")
    )


def test_a_spec_the_gate_refused_before_the_store_kept_decisions_stays_refused_while_unchanged() -> None:
    why = "approval gate at reconcile: the approvals of #41 are not there: s: 'erin' has not approved"
    before = Binding(
        "s",
        "orders_daily",
        None,
        Phase.BLOCKED,
        spec_digest=SPEC.spec.digest,
        reason=why,
        refused=True,
        approval_refused=True,
    )
    assert apply(Plan((item(),)), None, bindings={"s": before})[0].items[0].reason == why
    for unlike in (
        replace(before, phase=Phase.PENDING),  # decided again since
        replace(before, approval_refused=False),  # refused for another reason
        replace(before, spec_digest="sha256:other"),  # the file changed
    ):
        assert apply(Plan((item(),)), None, bindings={"s": unlike})[0].items == (item(),)
    assert apply(Plan((item(),)), KEPT, bindings={"s": before})[0].items == (item(),)  # a decision now decides


def test_a_blocked_spec_names_no_stop_by_its_resume() -> None:
    spec = RESUMING.spec
    plain = loaded(text(name="t")).spec
    found = replace(gate(), paths={"s": PATH, "t": "specs/t.yaml"})
    assert resumable([spec, plain], found, {PATH: KEPT}) == [spec, plain]
    assert resumable([spec, plain], found, {PATH: REFUSED}) == [replace(spec, resume=None), plain]
    assert resumable([spec], found, {PATH: HELD}) == [replace(spec, resume=None)]
    assert resumable([spec], replace(found, rewritten="9" * 40), {}) == [replace(spec, resume=None)]
    refused = Binding("s", "d", 7, Phase.PAUSED, spec_digest=spec.digest, approval_refused=True)
    assert resumable([spec], replace(found, bindings={"s": refused}), {}) == [replace(spec, resume=None)]
    policy = GateDecision(POLICY_PATH, OTHER_BLOB, Verdict.UNREVIEWED, "x")
    with_policy = replace(found, policy_path=POLICY_PATH)
    assert resumable([spec], with_policy, {POLICY_PATH: policy}) == [replace(spec, resume=None)]
    assert resumable([spec], with_policy, {POLICY_PATH: replace(policy, verdict=Verdict.APPROVED)}) == [spec]


# --- each decision whole, and what only some inputs show ---------------------------------------------------------


def test_held_and_unreviewed_decisions_name_their_file_version_and_commit() -> None:
    outage = carried(None, commit="4" * 40)
    assert assess(gate(outage, carriers={PATH: "5" * 40}))[PATH] == GateDecision(
        PATH,
        BLOB,
        Verdict.HELD,
        "held: the evidence of commit 444444444444 could not be fetched; decided again next pass",
        commit="4" * 40,  # the commit that carried it, not the last one that touched the file
    )
    rewritten = assess(gate(rewritten="9" * 40, carriers={PATH: "5" * 40}))[PATH]
    assert (rewritten.path, rewritten.blob, rewritten.verdict, rewritten.commit) == (
        PATH,
        BLOB,
        Verdict.UNREVIEWED,
        "5" * 40,
    )
    required = assess(gate(require=True, carriers={PATH: "5" * 40}))[PATH]
    assert (required.path, required.blob, required.commit) == (PATH, BLOB, "5" * 40)


def test_every_missing_approval_is_said_and_a_stale_one_is_not_recorded_as_counted() -> None:
    stale = (*ALL, forge_review("pete", commit=BASE))
    (decision,) = assess(gate(carried(evidence(*stale)))).values()
    assert decision.approval is not None
    assert [r.login for r in decision.approval.reviews] == ["dave", "erin", "olga"]  # pete's is of another commit
    none = decided(gate(carried(evidence(forge_review("mallory")))))
    assert none == (
        Verdict.REFUSED,
        UNAPPROVED + "s: 'dave' has not approved the pull request; s: 'erin' has not approved the pull request; s: the "
        "warehouse budget's owners (olga, pete) have not approved the pull request; s: 0 of the 1 approvals this spec "
        "needs are present",
    )


def test_files_that_are_not_judged_do_not_stop_the_others_being_judged() -> None:
    files = {"specs/a-policy.yaml": OTHER_BLOB, "specs/a-unknown.yaml": OTHER_BLOB, PATH: BLOB}
    found = gate(carried(evidence(*ALL)), files=files, policy_path="specs/a-policy.yaml")
    assert set(assess(found)) == {PATH}


def test_a_stop_not_named_is_skipped_and_a_named_one_after_it_still_judged() -> None:
    only_dave = gate(
        carried(evidence(forge_review("dave"))),
        loaded={"s": RESUMING},
        specs=(RESUMING.spec,),
        stops=(replace(stop(), id=2), stop()),
    )
    found = decided(only_dave)
    assert found is not None
    assert found[1].endswith(
        "s: its resume lifts stop #3 of downstream warehouse, and none of its owners (olga, pete) "
        "approved the pull request"
    )


def test_a_spec_with_backfills_keeps_its_recorded_phase_whatever_refuses_it() -> None:
    why = "approval gate at reconcile: the approvals of #41 are not there: s: nope"
    for bound in (
        Binding(
            "s",
            "orders_daily",
            None,
            Phase.BLOCKED,
            backfills=(7,),
            spec_digest=SPEC.spec.digest,
            reason=why,
            approval_refused=True,
        ),  # between chunks
        Binding("s", "orders_daily", 7, Phase.BLOCKED, spec_digest=SPEC.spec.digest, reason=why, approval_refused=True),
    ):
        chunk = item(Kind.CREATE, awaiting_dry_run=True, phase=Phase.PENDING)
        (refused,) = apply(Plan((chunk,)), None, bindings={"s": bound})[0].items
        assert (refused.kind, refused.reason, refused.held, refused.request, refused.awaiting_dry_run) == (
            Kind.REFUSE,
            why,
            chunk,
            None,
            False,
        )
    first = Binding(
        "s", "orders_daily", None, Phase.BLOCKED, spec_digest=SPEC.spec.digest, reason=why, approval_refused=True
    )
    assert apply(Plan((item(),)), None, bindings={"s": first})[0].items[0].held is None  # its phase: Blocked


def test_a_held_create_that_waited_for_its_dry_run_waits_for_nothing_else() -> None:
    (held,) = apply(Plan((item(Kind.WAIT, awaiting_dry_run=True),)), HELD)[0].items
    assert (held.awaiting_dry_run, held.request) == (False, None)


def test_the_findings_are_whole_and_in_the_plans_order() -> None:
    drift = Finding(FindingKind.DRIFT, "a_dag", "paused by hand", "x", 1)
    pushed = GateDecision(PATH, BLOB, Verdict.PUSHED, "x", direct=True)
    gated = apply(Plan((item(),), findings=(drift,)), pushed, rewritten="9" * 40)[0]
    assert gated.findings == (
        Finding(
            FindingKind.HISTORY_REWRITTEN,
            "",
            "HEAD does not descend from the last reconciled commit 999999999999 (a force-push): this pass applies "
            "reductions only, and every spec that differs from that commit needs its evidence again",
        ),
        Finding(FindingKind.UNREVIEWED_CHANGE, "", f"{PATH} changed in commit  without a pull request; applied", "s"),
        drift,
    )


def test_a_spec_outside_git_is_neither_gated_nor_kept_from_lifting() -> None:
    outside = replace(item(), spec="elsewhere")
    assert apply(Plan((outside,)), REFUSED)[0].items == (outside,)
    spec = replace(RESUMING.spec, name="elsewhere")
    assert resumable([spec], gate(), {PATH: REFUSED}) == [spec]


def test_plan_and_status_show_what_the_store_keeps_and_decide_nothing() -> None:
    held = replace(KEPT, verdict=Verdict.HELD, reason="held: outage")
    shown = gate(carried(evidence()), require=True, deciding=False, recorded={PATH: held, "specs/gone.yaml": KEPT})
    assert assess(shown) == {PATH: held}  # not refused anew for the evidence, nor unreviewed for the requirement
    assert assess(replace(shown, recorded={PATH: replace(held, blob=OTHER_BLOB)})) == {}
