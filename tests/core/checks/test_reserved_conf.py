"""Keys Airflow reserves for its serialisation are refused in `dag_run_conf` on every line, where they are (Airflow
3.4 answers 422; older lines would hand the DAG a value its serde decodes as an object); an applied spec keeps
what ran and gets a warning."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller.cli import main
from controller.core.checks.reserved_conf import RESERVED_CONF_KEYS, reserved_in
from controller.core.checks.validation import check_spec
from controller.core.documents.diagnostics import Severity
from controller.core.model.policy import DEFAULT_POLICY
from tests.cli.test_cli_validate import SPEC
from tests.core.specs import loaded, text

NOW = datetime(2026, 12, 1, tzinfo=UTC)
CONF = "dag_run_conf:\n  region: eu\n  jobs:\n    - {name: a}\n    - {name: b, opts: {__var: 1, __classname__: x}}\n"
MESSAGE = (
    "this mapping holds __classname__, __var: Airflow reserves these keys for its serialisation (Airflow 3.4 "
    "refuses the backfill with 422; older releases would hand the DAG a value its code decodes as a serialised "
    "object)"
)


def test_the_keys_are_airflows() -> None:
    """`FORBIDDEN_XCOM_KEYS` of airflow/_shared/serialization in 3.4.0b2 (current and legacy serde keys)."""
    assert sorted(RESERVED_CONF_KEYS) == sorted(
        ["__classname__", "__version__", "__data__", "__id__", "__cache__", "__type", "__source", "__var"]
    )


def test_each_mapping_holding_them_is_found_with_its_path_and_strings_are_not_read() -> None:
    conf = {"a": {"__data__": 1}, "b": [{"x": {"__id__": 2, "__type": 3}}], "c": '{"__data__": 1}', "__version__": 0}
    assert list(reserved_in(conf)) == [
        ((), ["__version__"]),
        (("a",), ["__data__"]),
        (("b", 0, "x"), ["__id__", "__type"]),
    ]
    assert list(reserved_in({"data": 1, "_var": 2, "__vars": 3})) == []


def test_validate_refuses_them_at_their_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "good.yaml").write_text(SPEC.format(name="good", to="2025-01-07", reprocess="none") + CONF)
    assert main(["validate", "specs/good.yaml"]) == 1
    assert capsys.readouterr().out == (
        f"specs/good.yaml:16:23: $.dag_run_conf.jobs[1].opts: {MESSAGE}\n"
        "  hint: rename the key (without the double underscores)\n"
        "1 error, 0 warnings in 1 file.\n"
    )


def test_an_applied_spec_gets_a_warning() -> None:
    item = loaded(text() + CONF)
    new = [d for d in check_spec(item, DEFAULT_POLICY, NOW) if "reserves" in d.message]
    applied = [d for d in check_spec(item, DEFAULT_POLICY, NOW, applied=True) if "reserves" in d.message]
    assert [(d.severity, d.message, d.location.path) for d in new] == [
        (Severity.ERROR, MESSAGE, ("dag_run_conf", "jobs", 1, "opts"))
    ]
    assert [(d.severity, d.message) for d in applied] == [
        (
            Severity.WARNING,
            f"{MESSAGE} (the spec was applied already: what ran keeps its conf; a new spec must not use these keys)",
        )
    ]
