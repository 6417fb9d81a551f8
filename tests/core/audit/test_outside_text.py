"""Outside text is safe to hash, store and show (R2): the pure parts, which the mutation gate runs.

The hashes are computed here from the contract (sha256(prev_hash + canonical JSON)), not with controller code: an
entry that UTF-8 can write is sealed byte for byte as before; one holding a lone surrogate is sealed with the
surrogate as its `\\uXXXX` escape, and that record verifies.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from controller.core.audit.chain import ENTRY_FIELDS, GENESIS, AuditEntry, encodable, seal
from controller.core.audit.keying import verify_chain
from controller.core.documents.storable import SURROGATE, storable, storable_text

TIME = "2026-01-02T03:04:05.000006Z"


def contract_hash(prev_hash: str, seq: int, time: str, entry: AuditEntry) -> str:
    body: dict[str, Any] = {name: getattr(entry, name) for name in ENTRY_FIELDS} | {"seq": seq, "time": time}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + text).encode("utf-8")).hexdigest()


def entry(**fields: Any) -> AuditEntry:
    return AuditEntry(action="create", phase="outcome", actor="ci-bot", controller_version="0.1.0", **fields)


# --- storable text --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("bad \ud800 x", "bad \\ud800 x"),
        ("\udfff", "\\udfff"),
        ("a\ud83d", "a\\ud83d"),  # the first half of a pair, alone
        ("nul\x00here", "nul\\u0000here"),
        ("\U0001f600 kept", "\U0001f600 kept"),  # a pair that makes a character is that character
        ("\ufffd \\ud800 é", "\ufffd \\ud800 é"),  # text that is already storable is as it was
        ("", ""),
    ],
)
def test_storable_text_escapes_what_utf8_and_postgresql_cannot_hold(text: str, stored: str) -> None:
    assert storable_text(text) == stored
    stored.encode("utf-8")  # never raises


def test_storable_reaches_keys_values_and_nesting_and_leaves_other_values() -> None:
    value = {"k\ud800": ["\udc00", {"deep": "x\x00"}, 1, 2.5, None, True], "n": 3, 4: "four"}
    assert storable(value) == {"k\\ud800": ["\\udc00", {"deep": "x\\u0000"}, 1, 2.5, None, True], "n": 3, 4: "four"}
    assert storable(("a\ud800",)) == ["a\\ud800"]
    assert storable("x\x00", SURROGATE) == "x\x00"  # the chain's pattern: a NUL is UTF-8, hashed as it is


# --- the audit chain ------------------------------------------------------------------------------------------


def test_an_entry_utf8_can_write_is_sealed_byte_for_byte_as_before() -> None:
    """NUL, U+FFFD, a non-BMP character and a literal backslash-u are all written as they are: the same hash."""
    valid = entry(
        message="ok \x00 \ufffd \U0001f600 \\ud800",
        request={"body": {"dag_run_conf": {"k": "\ufffd"}}},
        response={"detail": "é"},
    )
    record = seal(1, TIME, valid, GENESIS)
    assert record.entry is valid
    assert record.hash == contract_hash(GENESIS, 1, TIME, valid)
    assert record.hash == "bebe52887e2071c12d6c37724a416056b0674e8b4f082dcd90bad98bbc1ad7ae"


def test_a_lone_surrogate_from_outside_is_recorded_escaped_and_the_chain_verifies() -> None:
    hostile = entry(
        dag_id="d\ud800",
        message="POST /api/v2/backfills/dry_run -> 422: bad \ud800 x",
        request={"body": {"dag_run_conf": {"k\udfff": ["v\ud83d"]}}},
        response={"status": 500, "detail": "\udc80"},
    )
    first = seal(1, TIME, hostile, GENESIS)
    assert first.entry == entry(
        dag_id="d\\ud800",
        message="POST /api/v2/backfills/dry_run -> 422: bad \\ud800 x",
        request={"body": {"dag_run_conf": {"k\\udfff": ["v\\ud83d"]}}},
        response={"status": 500, "detail": "\\udc80"},
    )
    assert first.hash == contract_hash(GENESIS, 1, TIME, first.entry)
    second = seal(2, TIME, entry(message="after"), first.hash)
    assert verify_chain([first.link(), second.link()]).ok


def test_encodable_escapes_surrogates_only() -> None:
    assert encodable(entry(message="a\ud800\x00", outcome="\udfff")) == entry(message="a\\ud800\x00", outcome="\\udfff")
