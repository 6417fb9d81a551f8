"""The approval gate at reconcile (pure): the rules of pull-request time, applied again to every change that reached
the branch since the last commit this store reconciled, whatever merged it, before it starts or restarts work.

`assess` decides each spec and policy file at HEAD: a file whose version a change's evidence carries is judged by that
change (`base_sha`..`merge_sha`, any merge method): approvals on its head commit, from reviewers with write access,
under the policy of its base, none from the author of the pull request or of one of its commits that touched the spec, a
`resume` naming an owner's stop approved by an owner, and a `drain_dag` spec approved by an owner of each system its DAG
loads. A decision is kept while its file is unchanged (`GateDecision`, in the store), so that a change is never let
through because the pass that saw it is over. A changed file without evidence goes on (the change record says "approval
not recorded"), unless the policy requires a reviewed merge or it is a `drain_dag` spec (gated as a restart of work);
one whose evidence could not be fetched is held. `gate_plan` applies the decisions to what starts or restarts work:
creates (a first one or a next chunk) and unpauses (a resume, `state: active`), and the creates still waiting for their
turn; reductions are never held. A history rewritten under the store (HEAD does not descend from the last reconciled
commit) allows reductions only for that pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from controller.core.checks.approval import (
    ChangeReview,
    Review,
    authored,
    check_approvals,
    forge_reviews,
    latest_decisions,
    valid_approvals,
)
from controller.core.checks.loaded import LoadedSpec
from controller.core.model.binding import Approval, ApprovedReview, Binding, Phase
from controller.core.model.evidence import Evidence, GateDecision, MergedChange, Verdict
from controller.core.model.policy import DEFAULT_POLICY, Policy
from controller.core.model.spec import BackfillSpec
from controller.core.model.stops import EmergencyStop
from controller.core.plan.stops import named_by_resume, stop_owners
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan
from controller.core.rules.scope import outside

REFUSED = "approval gate at reconcile"
NOT_RECORDED = "approval not recorded"
NO_REVIEW = "no reviewed pull request for this change"
SUPPLY = (
    "re-run the reconcile of the merge that carried it, or `backfillctl reconcile --evidence FILE` with the evidence "
    "of that change (`backfillctl evidence needed` lists the commits; docs/ci-trust.md)"
)
STARTS = frozenset({Kind.CREATE, Kind.UNPAUSE, Kind.WAIT})  # a wait is a create to come: judged now, not at its turn


@dataclass(frozen=True, slots=True)
class SpecOrigin:
    """Where a spec file comes from in git (what its audit records and its create intent name)."""

    commit: str | None = None  # the last commit that touched the file (None: not in git)
    author: str = ""  # the email of the commit that added the file ("": not known)


UNKNOWN_ORIGIN = SpecOrigin()  # a spec outside git, or read without it


def approved_by(approval: Approval | None, approvers: tuple[str, ...]) -> str:
    """The change record's words: who approved where and when, never the spec's bare list."""
    if approval is not None:
        return approval.text()
    return f"{NOT_RECORDED} (the spec lists {', '.join(approvers)})"


def approval_clause(approval: Approval | None, approvers: tuple[str, ...]) -> str:
    """The clause of a create intent's message: `approved by bob in #41 (…)`, or `approval not recorded (…)`."""
    words = approved_by(approval, approvers)
    return words if approval is None else f"approved by {words}"


@dataclass(frozen=True, slots=True)
class Carried:
    """A change that reached the branch, as git shows it: the version of each file it adds or changes, and what its
    evidence is judged with. `evidence` None: the evidence of `commit` could not be fetched."""

    commit: str  # the branch's commit that carries it
    files: Mapping[str, str]  # repository-relative path → blob at `commit`, of each file the change adds or changes
    evidence: Evidence | None = None
    policy: Policy = DEFAULT_POLICY  # the policy at the change's base
    policy_blob: str = ""  # its blob ("": none, the default policy)
    authors: Mapping[str, tuple[str, ...]] | None = None  # path → e-mails of the authors of the change's commits
    # that touched it (None: its commits are not in this clone)
    order: int = 0  # its place on the branch: the larger, the later


@dataclass(frozen=True, slots=True)
class Gate:
    """What the gate decides with (`commands/reconcile/gate.py` gathers it from git, the store, the evidence)."""

    files: Mapping[str, str]  # repository-relative path → blob at HEAD, of the pass's specs, the policy and each
    # path a decision is kept for (the gate judges and forgets no other file)
    paths: Mapping[str, str]  # spec name → its file's path
    policy_path: str = ""  # the policy file's path ("": there is none)
    changed: frozenset[str] = frozenset()  # paths that differ from the last reconciled commit's (all: none known)
    carried: tuple[Carried, ...] = ()
    recorded: Mapping[str, GateDecision] = field(default_factory=dict)  # path → the decision the store keeps
    rewritten: str | None = None  # the last reconciled commit, when HEAD does not descend from it
    require: bool = False  # the policy's `require_reviewed_merge` (at HEAD or at the last reconciled commit)
    loaded: Mapping[str, LoadedSpec] = field(default_factory=dict)  # spec name → as loaded at HEAD
    stops: tuple[EmergencyStop, ...] = ()  # the stops in force (a resume naming an owner's needs an owner)
    specs: tuple[BackfillSpec, ...] = ()
    bindings: Mapping[str, Binding] = field(default_factory=dict)
    carriers: Mapping[str, str] = field(default_factory=dict)  # path → the branch's commit that last changed it
    deciding: bool = True  # False (plan, status): only what the store keeps is shown, nothing is decided anew
    scope: frozenset[str] | None = None  # the paths whose kept decisions were read (None: every one), and forgotten by

    @property
    def names(self) -> dict[str, str]:
        """Path → the spec name it holds."""
        return {path: name for name, path in self.paths.items()}


# --- deciding each file --------------------------------------------------------------------------------------


def assess(gate: Gate) -> dict[str, GateDecision]:
    """Path → the gate's decision for each file at HEAD that has one (none: it goes on as before)."""
    if not gate.deciding:
        return {path: kept for path, kept in gate.recorded.items() if gate.files.get(path) == kept.blob}
    names = gate.names
    found: dict[str, GateDecision] = {}
    for path, blob in sorted(gate.files.items()):
        if path == gate.policy_path and not gate.require:
            continue  # the policy is judged by reviews only where a reviewed merge is required
        if path != gate.policy_path and path not in names:
            continue  # not a valid spec now: Blocked alone, decided once it is
        decision = _decide(gate, path, blob, names.get(path))
        if decision is not None:
            found[path] = decision
    return found


def _decide(gate: Gate, path: str, blob: str, name: str | None) -> GateDecision | None:  # noqa: PLR0911
    carrier = _carrier(gate, path, blob)
    kept = gate.recorded.get(path)
    same = kept if kept is not None and kept.blob == blob else None
    again = gate.rewritten is not None and path in gate.changed  # a rewritten history: its evidence again
    if carrier is not None and carrier.evidence is not None:
        return _judge(gate, carrier, carrier.evidence, path, blob, name=name)
    if same is not None and same.verdict is Verdict.APPROVED and not again:
        return same
    if path not in gate.changed and (same is None or same.verdict is Verdict.APPROVED):
        return None  # as it was at the last reconciled commit, and decided then
    commit = carrier.commit if carrier is not None else gate.carriers.get(path)
    if carrier is not None:
        why = f"held: the evidence of commit {carrier.commit[:12]} could not be fetched; decided again next pass"
        return GateDecision(path, blob, Verdict.HELD, why, commit=commit)
    if same is not None and same.verdict in (Verdict.REFUSED, Verdict.UNREVIEWED):
        return same  # refused until the file changes or its evidence is supplied
    if gate.rewritten is not None:
        why = (
            f"{NO_REVIEW}: history was rewritten (HEAD does not descend from the last reconciled commit "
            f"{gate.rewritten[:12]}), so {path} needs its evidence again; {SUPPLY}"
        )
        return GateDecision(path, blob, Verdict.UNREVIEWED, why, commit=commit)
    if gate.require or _drains(gate, name):
        return GateDecision(path, blob, Verdict.UNREVIEWED, _unreviewed(gate, path, name, commit), commit=commit)
    return None


def _drains(gate: Gate, name: str | None) -> bool:
    """A `drain_dag` spec is gated as a restart of work: its DAG's downstream owners must have approved it, which
    only a reviewed merge's evidence shows (whatever `require_reviewed_merge` says)."""
    return name is not None and name in gate.loaded and gate.loaded[name].spec.drain_dag


def _unreviewed(gate: Gate, path: str, name: str | None, commit: str | None, pushed: bool = False) -> str:
    how = "was pushed without a pull request" if pushed else "has no evidence of a reviewed pull request"
    where = f" in commit {commit[:12]}" if commit else ""
    why = (
        "the policy requires a reviewed merge"
        if gate.require
        else "a drain_dag spec needs a reviewed merge its DAG's downstream owners approved"
    )
    return f"{NO_REVIEW}: {path}{where} {how} ({why}); {SUPPLY}"


def _carrier(gate: Gate, path: str, blob: str) -> Carried | None:
    """The latest change that carries this version of the file (with evidence before without, at one place)."""
    carrying = [c for c in gate.carried if c.files.get(path) == blob]
    return max(carrying, key=lambda c: (c.order, c.evidence is not None), default=None)


def _judge(gate: Gate, carrier: Carried, evidence: Evidence, path: str, blob: str, *, name: str | None) -> GateDecision:
    """A file version's decision from the `evidence` its carrier brought (the carrier's, passed non-optional)."""
    change = evidence.change

    def made(verdict: Verdict, reason: str = "", approval: Approval | None = None) -> GateDecision:
        return GateDecision(
            path, blob, verdict, reason, approval, carrier.policy_blob, carrier.commit, direct=change is None
        )

    if change is None:
        unreviewed = gate.require or _drains(gate, name)
        why = _unreviewed(gate, path, name, carrier.commit, pushed=True)
        return made(Verdict.UNREVIEWED if unreviewed else Verdict.PUSHED, why)
    if carrier.authors is None:
        head = (change.head_sha or change.merge_sha)[:12]
        why = (
            f"held: the commits of #{change.number} (up to its head {head}) are not in this clone, so who authored "
            f"them is not known; fetch them (git fetch origin refs/pull/{change.number}/head); decided again next pass"
        )
        return made(Verdict.HELD, why)
    review = ChangeReview(
        latest_decisions(forge_reviews(evidence.reviews)),
        change.author,
        change.head_sha,
        authored(carrier.authors.get(path, ()), carrier.policy),
    )
    if name is None:
        approvals = review.approvals()
        problems = [] if approvals else [f"{path}: no approval of the pull request counts"]
    else:
        loaded = gate.loaded[name]
        found = check_approvals(
            loaded, review.decisions, change.author, change.head_sha, carrier.policy, authors=review.authors
        )
        problems = [d.message for d in found] + _stop_problems(gate, loaded, review, carrier.policy)
        outside_base = _outside_base(loaded, carrier.policy)
        if outside_base is not None:
            return made(
                Verdict.REFUSED, f"{REFUSED}: #{change.number} is judged by the policy at its base: {outside_base}"
            )
        approvals = valid_approvals(loaded, review, carrier.policy)
    if problems:
        why = "; ".join(problems)
        return made(Verdict.REFUSED, f"{REFUSED}: the approvals of #{change.number} are not there: {why}")
    return made(Verdict.APPROVED, approval=_approval(change, approvals, carrier.policy_blob))


def _outside_base(loaded: LoadedSpec, base: Policy) -> str | None:
    """Issue 44: a scope widened in the same change does not admit its own specs: the base's scope judges them, as
    every other policy rule (the widening is reviewed on its own, under CODEOWNERS, and counts from the next change).
    Only the globs are known here; a DAG the base's tags may cover is decided at reconcile."""
    refusal = outside(loaded.spec.dag_id, None, base)
    if refusal is None:
        return None
    return f"{refusal.replace('this repository', 'the base policy')}; widen the scope in a change of its own first"


def _stop_problems(gate: Gate, loaded: LoadedSpec, review: ChangeReview, policy: Policy) -> list[str]:
    """A `resume` naming an owner's stop lifts it only with an approval from one of that stop's owners."""
    spec, found = loaded.spec, []
    named = named_by_resume(spec)
    for stop in gate.stops:
        if stop.id not in named or not stop.covers(spec):
            continue
        owners = stop_owners(policy, gate.specs, stop)
        if owners and not any(review.counts(o) for o in owners):
            found.append(
                f"{spec.name}: its resume lifts stop #{stop.id} of {stop.kind.value} {stop.target}, and none of its "
                f"owners ({', '.join(owners)}) approved the pull request"
            )
    return found


def _approval(change: MergedChange, reviews: Sequence[Review], policy_blob: str) -> Approval:
    counted = tuple(ApprovedReview(r.login, r.review_id, r.commit_id, r.submitted_at) for r in reviews)
    return Approval(change.number, change.merge_sha, counted, change.url, change.base_sha, change.head_sha, policy_blob)


# --- applying the decisions to the plan -----------------------------------------------------------------------


def gate_plan(plan: Plan, gate: Gate, decisions: Mapping[str, GateDecision]) -> tuple[Plan, dict[str, Approval]]:
    """The plan with each start the decisions refuse or hold turned into a refusal or a hold (a rewritten history:
    every start held), and the approvals of the specs whose change was approved. The plan keeps its checksum: the
    gate only ever takes starts away."""
    policy = decisions.get(gate.policy_path)
    items: list[Item] = []
    findings: list[Finding] = []
    approvals: dict[str, Approval] = {}
    for item in plan.items:
        decision = _of(item.spec, gate, decisions)
        if decision is not None and decision.approval is not None:
            approvals[item.spec] = decision.approval
        gated = _gated(item, gate, decision, policy)
        items.append(gated)
        if gated.held is not None and gated is not item and gate.rewritten is None:
            findings.append(Finding(FindingKind.APPROVAL_GATE, item.dag_id, gated.reason, item.spec, item.backfill_id))
    findings += _flagged(gate, decisions)
    if gate.rewritten is not None:
        message = (
            f"HEAD does not descend from the last reconciled commit {gate.rewritten[:12]} (a force-push): this pass "
            "applies reductions only, and every spec that differs from that commit needs its evidence again"
        )
        findings.append(Finding(FindingKind.HISTORY_REWRITTEN, "", message))
    gated_plan = replace(
        plan,
        items=tuple(items),
        findings=tuple(sorted((*plan.findings, *findings), key=Finding.sort_key)),
        unmetered=plan.checksum(),
    )
    return gated_plan, approvals


def _of(name: str, gate: Gate, decisions: Mapping[str, GateDecision]) -> GateDecision | None:
    """The decision for a spec's file (None: none, or the spec is not in git)."""
    return decisions.get(gate.paths[name]) if name in gate.paths else None


def _gated(item: Item, gate: Gate, decision: GateDecision | None, policy: GateDecision | None) -> Item:
    if item.kind not in STARTS or item.source is None:
        return item  # reductions, adoptions and what is settled are never held by the gate
    if gate.rewritten is not None:
        return _hold(
            item,
            f"held: history was rewritten under the store (last reconciled {gate.rewritten[:12]}); "
            "this pass applies reductions only",
        )
    blocking = next((d for d in (decision, policy) if d is not None and d.verdict.blocks), None)
    binding = gate.bindings.get(item.spec)
    if blocking is None:
        refused = _refused_before(binding, item) if decision is None else None
        if refused is not None:
            return _refuse(item, refused.reason, refused)  # refused at its merge, unchanged since: still refused
        return item
    if blocking.verdict is Verdict.HELD:
        return _hold(item, blocking.reason)
    return _refuse(item, blocking.reason, binding)


def _refused_before(binding: Binding | None, item: Item) -> Binding | None:
    """A store written before the gate kept its decisions: the binding, when it says the gate refused this very file."""
    refused = (
        binding is not None
        and binding.phase is Phase.BLOCKED
        and binding.approval_refused
        and item.source is not None
        and binding.spec_digest == item.source.digest
    )
    return binding if refused else None


def _first(binding: Binding | None) -> bool:
    """A spec that has no backfill yet: its refusal is its recorded phase (Blocked)."""
    return binding is None or (binding.backfill_id is None and not binding.backfills)


def _refuse(item: Item, reason: str, binding: Binding | None) -> Item:
    if _first(binding):
        return replace(
            item,
            kind=Kind.REFUSE,
            phase=Phase.BLOCKED,
            reason=reason,
            request=None,
            awaiting_dry_run=False,
            approval_refused=True,
        )
    # a spec with backfills keeps its recorded phase (the backfill stays as it is); the finding is audited
    return replace(item, kind=Kind.REFUSE, reason=reason, request=None, awaiting_dry_run=False, held=item)


def _hold(item: Item, reason: str) -> Item:
    """Held: nothing starts for it this pass, a rehearsal neither (the recorded phase stays what it was)."""
    phase = Phase.PAUSED if item.kind is Kind.UNPAUSE else Phase.PENDING
    return replace(item, kind=Kind.WAIT, phase=phase, reason=reason, request=None, awaiting_dry_run=False, held=item)


def resumable(specs: Sequence[BackfillSpec], gate: Gate, decisions: Mapping[str, GateDecision]) -> list[BackfillSpec]:
    """The specs as a pass may lift stops by their `resume`: a spec whose start the gate refuses or holds names no
    stop (its `resume` is left out), so that no stop is lifted by an unreviewed change."""
    policy = decisions.get(gate.policy_path)
    held = gate.rewritten is not None or (policy is not None and policy.verdict.blocks)

    def blocked(spec: BackfillSpec) -> bool:
        decision = _of(spec.name, gate, decisions)
        if decision is not None:
            return decision.verdict.blocks
        binding = gate.bindings.get(spec.name)
        return binding is not None and binding.approval_refused and binding.spec_digest == spec.digest

    return [replace(s, resume=None) if s.resume and (held or blocked(s)) else s for s in specs]


def _flagged(gate: Gate, decisions: Mapping[str, GateDecision]) -> list[Finding]:
    """A file a commit pushed without a pull request: its reductions are applied, and it is said once."""
    names = gate.names
    return [
        Finding(
            FindingKind.UNREVIEWED_CHANGE,
            "",
            f"{path} changed in commit {(d.commit or '')[:12]} without a pull request; "
            + ("what it starts is refused (a reviewed merge is required)" if d.verdict.blocks else "applied"),
            names.get(path),
        )
        for path, d in sorted(decisions.items())
        if d.direct
    ]
