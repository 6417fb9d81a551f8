"""The pure hash chain: sealing, verification findings, and the fast body text (Hypothesis)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from controller.core.audit.chain import GENESIS, SCALARS, AuditEntry, body_text, seal
from controller.core.audit.keying import verify_chain
from controller.core.model.spec import canonical_json

text = st.text(max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
entries = st.builds(
    AuditEntry,
    action=text,
    phase=text,
    actor=text,
    controller_version=text,
    outcome=st.none() | text,
    git_commit=st.none() | text,
    spec_name=st.none() | text,
    spec_path=st.none() | text,
    spec_digest=st.none() | text,
    dag_id=st.none() | text,
    backfill_id=st.none() | st.integers(0, 10**9),
    request=st.none() | st.dictionaries(text, json_values, max_size=4),
    response=st.none() | st.dictionaries(text, json_values, max_size=4),
    message=st.none() | text,
)


@given(entries, st.integers(1, 10**12), text)
def test_fast_body_text_equals_canonical_json(entry: AuditEntry, seq: int, time: str) -> None:
    record = seal(seq, time, entry, GENESIS)
    body = record.body()
    scalars = {key: body[key] for key in SCALARS}
    fast = body_text(scalars, canonical_json(entry.request), canonical_json(entry.response))
    assert fast == canonical_json(body)
    assert record.link()[3] == fast


def chain(n: int) -> list:  # type: ignore[type-arg]
    records, prev = [], GENESIS
    for seq in range(1, n + 1):
        record = seal(seq, f"t{seq}", AuditEntry("create", "intent", "alice", "0.1.0", message=f"m{seq}"), prev)
        records.append(record)
        prev = record.hash
    return records


def test_intact_chain_verifies() -> None:
    records = chain(5)
    result = verify_chain(r.link() for r in records)
    assert (result.ok, result.count, result.head_seq, result.head_hash) == (True, 5, 5, records[-1].hash)


def test_edit_gap_reorder_truncate() -> None:
    records = chain(6)
    edited = [*records[:2], replace(records[2], entry=replace(records[2].entry, message="x")), *records[3:]]
    gap = records[:3] + records[4:]
    swapped = [*records[:3], records[4], records[3], records[5]]
    findings = [verify_chain(r.link() for r in rs).problem for rs in (edited, gap, swapped)]
    assert [(f.kind, f.seq) for f in findings if f] == [("INVALID", 3), ("GAP", 4), ("GAP", 4)]
    truncated = verify_chain((r.link() for r in records[:4]), expect_head=records[-1].hash)
    assert truncated.problem is not None
    assert (truncated.problem.kind, truncated.problem.seq) == ("TRUNCATED", 5)
    assert verify_chain((r.link() for r in records), expect_head=records[3].hash).ok
