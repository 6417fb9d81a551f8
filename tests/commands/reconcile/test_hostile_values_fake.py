"""Whatever `validate` accepts goes through reconcile and the audit chain, on SQLite and PostgreSQL; what JSON or
PostgreSQL cannot carry is refused before any Airflow call or audit record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.store.conftest import postgres_admin, store_url
from tests.commands.reconcile.harness import Bench, fake, mutating
from tests.fakes.airflow import FakeAirflow

__all__ = ["postgres_admin", "store_url"]  # the store tests' fixtures: SQLite and a throw-away PostgreSQL


@pytest.fixture
def hostile(tmp_path: Path, store_url: str) -> Iterator[Bench]:
    bench = Bench(tmp_path, fake=FakeAirflow(), store_url=store_url)
    yield bench
    bench.close()


# at the edge of what validates: non-BMP text by its \U escape, control characters, a line separator, the largest
# safe integers, the largest and smallest doubles, and conf nested to the deepest level allowed (64 with the spec)
EDGE_CONF = (
    "{max: 9007199254740991, min: -9007199254740991, big: 1.7976931348623157e308, tiny: 5e-324, "
    '"ключ": "\\U0001F600 \\x01\\e[31m\\u2028\\x85", deep: ' + "[" * 62 + "]" * 62 + "}"
)


def test_values_at_the_edge_of_what_validates_reach_airflow_and_the_audit_chain(hostile: Bench) -> None:
    hostile.spec(
        "edge",
        dag_run_conf=EDGE_CONF,
        downstream='["caf\\u00e9 \\U0001F600", "tab\\there"]',
    )
    path = hostile.specs / "edge.yaml"
    path.write_text(path.read_text().replace("ticket: CHG-1", 'ticket: "CHG-1 \\U0001F600 \\x7f"'))
    result = hostile.run()
    assert [(i.spec, o) for i, o in result.applied] == [("edge", "created")]
    (backfill,) = fake(hostile).backfills.values()
    expected = {
        "max": 2**53 - 1,
        "min": -(2**53 - 1),
        "big": 1.7976931348623157e308,
        "tiny": 5e-324,
        "ключ": "\U0001f600 \x01\x1b[31m\u2028\x85",
        "deep": json.loads("[" * 62 + "]" * 62),
    }
    assert backfill["dag_run_conf"] == expected
    assert hostile.trail("edge") == [("create", "intent", None), ("create", "outcome", "created")]
    (intent, _outcome) = hostile.events("edge")
    assert intent.entry.request is not None
    assert intent.entry.request["body"]["dag_run_conf"] == expected
    assert hostile.store.verify().ok


@pytest.mark.parametrize(
    ("field", "value", "found"),
    [
        ("reason", '"A \\ud800 reason."', "11:9: $.reason: the string holds a lone surrogate U+D800 at character 3"),
        (
            "requested_by",
            '"al\\udcffice"',
            "11:15: $.requested_by: the string holds a lone surrogate U+DCFF at character 3",
        ),
        ("approvers", '["b\\ud800"]', "11:13: $.approvers[0]: the string holds a lone surrogate U+D800 at character 2"),
        ("ticket", '"CHG-1\\0"', "11:9: $.ticket: the string holds a NUL character (\\0) at character 6"),
        ("dag_run_conf", '{"k\\ud800": 1}', "12:16: $.dag_run_conf['k\\ud800']: the key holds a lone surrogate U+D800"),
        ("dag_run_conf", "{x: 1e999}", "12:19: $.dag_run_conf.x: number 1e999 is out of range"),
        ("dag_run_conf", "{x: -1e999}", "12:19: $.dag_run_conf.x: number -1e999 is out of range"),
        ("dag_run_conf", "{x: .nan}", "12:19: $.dag_run_conf.x: .nan is NaN (not a number) in YAML 1.2"),
        ("dag_run_conf", "{x: 9007199254740992}", "12:19: $.dag_run_conf.x: integer 9007199254740992 is out of range"),
        (
            "dag_run_conf",
            "{x: " + "9" * 5000 + "}",
            "12:19: $.dag_run_conf.x: integer 9999999999...9999 (5000 characters)",
        ),
        ("dag_run_conf", "{x: " + "[" * 1000 + "]" * 1000 + "}", "12:81: $.dag_run_conf.x" + "[0]" * 62 + ": lists"),
    ],
    ids=[
        "reason",
        "requester",
        "approver",
        "nul",
        "key",
        "inf",
        "minus-inf",
        "nan",
        "2^53",
        "5000-digits",
        "1000-deep",
    ],
)
def test_what_json_cannot_carry_is_refused_before_any_call_or_audit_record(
    hostile: Bench, field: str, value: str, found: str
) -> None:
    """These once crashed every pass: UnicodeEncodeError in the chain hash, "Out of range float values are not
    JSON compliant" from httpx, PostgreSQL refusing a NUL in the audit text. The file is Blocked alone, with its
    located error (escaped: the audit record of the finding carries no raw value); the other spec is created."""
    hostile.spec("good")
    path = hostile.spec("bad")
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith(f"{field}:")]
    path.write_text("\n".join([*lines, f"{field}: {value}", ""]))
    result = hostile.run()
    (bad,) = [i for i in result.plan.items if i.spec == "bad"]
    assert (bad.kind.value, bad.phase.value, bad.error) == ("blocked", "Blocked", True)
    assert bad.reason.startswith(f"invalid spec: {path}:{found}")
    assert [(i.spec, o) for i, o in result.applied] == [("good", "created")]
    assert mutating(fake(hostile).requests) == [("POST", "/api/v2/backfills")]  # good's create only
    assert hostile.trail("bad") == [("finding", "observation", "invalid-spec")]  # no intent, no call
    (finding,) = hostile.events("bad")
    assert finding.entry.message == f"{path}: {bad.reason}"
    assert hostile.store.verify().ok
