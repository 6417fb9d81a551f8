"""`backfillctl validate` and `new` through the real entry point: formats, exit codes, error handling."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import main

SPEC = """version: 1
name: {name}
dag_id: orders_daily
from_date: "2025-01-01"
to_date: "{to}"
reprocess_behavior: {reprocess}
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
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "alice")
    (tmp_path / "specs" / "team").mkdir(parents=True)
    (tmp_path / "specs" / "good.yaml").write_text(SPEC.format(name="good", to="2025-01-07", reprocess="none"))
    (tmp_path / "specs" / "team" / "bad.yml").write_text(
        SPEC.format(name="bad", to="2025-01-07", reprocess="sometimes")
    )
    (tmp_path / "specs" / "future.yaml").write_text(SPEC.format(name="future", to="2099-01-01", reprocess="failed"))
    return tmp_path


def test_text_reports_every_file_and_exits_1(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 1
    assert capsys.readouterr().out == (
        "specs/future.yaml:5:10: $.to_date: warning: to_date 2099-01-01T00:00:00Z is in the future; "
        "Airflow only creates runs whose interval has already ended\n"
        "specs/team/bad.yml:6:21: $.reprocess_behavior: 'sometimes' is not one of ['none', 'failed', 'completed']\n"
        "1 error, 1 warning in 3 files.\n"
    )


def test_valid_paths_exit_0(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "specs/good.yaml", "specs/future.yaml"]) == 0
    assert capsys.readouterr().out.endswith("OK: 2 specs valid (2 files, 1 warning).\n")


def test_json_is_versioned_and_complete(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["format_version"] == 1
    assert document["valid"] is False
    assert document["summary"] == {"errors": 1, "warnings": 1}
    assert [s["name"] for s in document["specs"]] == ["future", "good"]
    error = next(d for d in document["diagnostics"] if d["severity"] == "error")
    assert error == {
        "severity": "error",
        "file": "specs/team/bad.yml",
        "line": 6,
        "column": 21,
        "json_path": "$.reprocess_behavior",
        "hint": None,
        "message": "'sometimes' is not one of ['none', 'failed', 'completed']",
    }


ANNOTATION = re.compile(r"^::(error|warning) file=[^,:]+,line=\d+,col=\d+,title=[^,:]+::[^\r\n]*$")


def test_github_annotations_are_workflow_commands(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "specs" / "hinted.yaml").write_text(SPEC.format(name="hinted", to="2025-01-07", reprocess="no"))
    assert main(["validate", "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert all(ANNOTATION.match(line) for line in lines[:3]), lines
    assert lines[1] == (
        "::error file=specs/hinted.yaml,line=6,col=21,title=backfillctl validate::$.reprocess_behavior: "
        "'no' is not one of ['none', 'failed', 'completed']%0Ahint: YAML 1.1 tools read `no` as the boolean "
        "false; this loader keeps the string; did you mean 'none'?"
    )
    assert lines[3] == "2 errors, 1 warning in 4 files."


def test_missing_path_is_a_located_error(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "specs/nope.yaml"]) == 1
    assert capsys.readouterr().err == (
        "error: specs/nope.yaml: no such file or directory\n"
        "  hint: pass spec files or folders, e.g. `backfillctl validate specs/`\n"
    )


def test_symlink_outside_the_tree_is_refused(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tree / "outside.yaml"
    outside.write_text(SPEC.format(name="link", to="2025-01-07", reprocess="none"))
    (tree / "specs" / "link.yaml").symlink_to(outside)
    assert main(["validate", "specs/link.yaml", "specs/good.yaml"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("specs/link.yaml:1:1: symlink points outside the specs tree\n")


def test_usage_error_exits_2(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--format", "xml"]) == 2
    assert "Invalid value for '--format'" in capsys.readouterr().err


def test_unknown_command_exits_2(tree: Path) -> None:
    assert main(["frobnicate"]) == 2


def test_unexpected_error_exits_3_without_traceback_or_locals(tree: Path, tmp_path: Path) -> None:
    script = (
        "import sys; import controller.commands.reconcile.specfiles as v\n"
        "secret_local = 'CANARY-LOCAL-123'\n"
        "def boom(*a, **k):\n    token = 'CANARY-LOCAL-456'\n    raise RuntimeError('boom')\n"
        "v.validate_paths = boom\n"
        "from controller.cli import main; sys.exit(main(['validate']))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tree, capture_output=True, text=True, check=False)
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr.startswith("unexpected error: RuntimeError; this is a bug in backfillctl.\n")
    assert "Traceback" not in result.stderr
    crash_file = Path(result.stderr.split(": ")[-1].strip())
    assert "RuntimeError: boom" in crash_file.read_text()
    assert "CANARY-LOCAL" not in crash_file.read_text()
    crash_file.unlink()


def test_python_dash_m_works(tree: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "controller", "--version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stdout.startswith("backfillctl ")


NEW = ["--ticket", "CHG-42", "--reason", "January fix of the rounding bug", "--approver", "bob", "--reprocess", "none"]


def test_new_writes_a_spec_that_validates(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "new",
        "orders-jan",
        "--dag-id",
        "orders_daily",
        "--from",
        "2025-01-01",
        "--to",
        "2025-01-31",
        "--reprocess",
        "failed",
        "--ticket",
        "CHG-42",
        "--reason",
        "January fix: rounding # not a comment",
        "--requested-by",
        "carol",
        "--max-active-runs",
        "4",
        "--approver",
        "bob",
        "--approver",
        "dave",
    ]
    assert main(args) == 0
    assert capsys.readouterr().out == (
        "wrote specs/orders-jan.yaml\n"
        "expected_runs: left out (BACKFILLCTL_AIRFLOW_URL is not set); `backfillctl plan` shows the count\n"
        "next: `backfillctl plan`, then open a pull request with the file\n"
    )
    text = (tree / "specs" / "orders-jan.yaml").read_text()
    assert "\n# expected_runs: N  " in text  # left out, with how to get the number
    assert "`backfillctl plan` shows Airflow's dry-run count\n" in text
    assert 'to_date: "2025-01-31"             # inclusive; a date is 00:00 UTC of that day: an hourly DAG' in text
    assert 'reason: "January fix: rounding # not a comment"\n' in text
    assert 'requested_by: "carol"\n' in text
    assert "max_active_runs: 4 " in text
    assert 'approvers: ["bob", "dave"]' in text
    assert main(["validate", "specs/orders-jan.yaml"]) == 0
    assert main(args) == 1
    assert "error: specs/orders-jan.yaml already exists" in capsys.readouterr().err


@pytest.mark.parametrize("missing", ["--reprocess", "--ticket", "--reason", "--approver"])
def test_new_requires_the_choices_it_cannot_guess(tree: Path, capsys: pytest.CaptureFixture[str], missing: str) -> None:
    given = [a for i, a in enumerate(NEW) if missing not in (a, NEW[i - 1] if i else "")]
    assert main(["new", "x", "--dag-id", "d", "--from", "2025-01-01", "--to", "2025-01-02", *given]) == 2
    assert f"Missing option '{missing}'" in capsys.readouterr().err
    assert not (tree / "specs" / "x.yaml").exists()


def test_new_writes_nothing_that_would_not_validate(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "specs" / "policy.yaml").write_text(
        "version: 1\nticket_pattern: '^INC-[0-9]+$'\nmax_active_runs_limit: 2\n"
    )
    args = ["new", "x", "--dag-id", "d", "--from", "2025-01-01", "--to", "2025-01-02", *NEW, "--max-active-runs", "5"]
    assert main(args) == 1
    assert capsys.readouterr().err == (
        "error: not written: the spec would be invalid: specs/x.yaml:8:18: $.max_active_runs: "
        "max_active_runs 5 is over the limit of 2 set by policy\n"
        "  specs/x.yaml:12:9: $.ticket: ticket 'CHG-42' does not match the policy's pattern '^INC-[0-9]+$'\n"
        "  hint: fix the options that give these values; `backfillctl new --help` lists them\n"
    )
    assert not (tree / "specs" / "x.yaml").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["x", "--from", "2025-13-01", "--to", "2025-01-02"],
            "error: --from '2025-13-01' is not a date: month must be in 1..12\n",
        ),
        (
            ["x", "--from", "2025-01-01", "--to", "2025-02-30"],
            "error: --to '2025-02-30' is not a date: day is out of range for month\n",
        ),
        (
            ["../escape", "--from", "2025-01-01", "--to", "2025-01-02"],
            "error: invalid spec name '../escape': lower-case letters, digits, '-', '_' and '.', "
            "starting with a letter or digit, at most 100 characters\n",
        ),
        (
            ["Bad_Name", "--from", "2025-01-01", "--to", "2025-01-02"],
            "error: invalid spec name 'Bad_Name': lower-case letters, digits, '-', '_' and '.', "
            "starting with a letter or digit, at most 100 characters\n",
        ),
    ],
)
def test_new_refuses_bad_values_before_writing_anything(
    tree: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    assert main(["new", *args, "--dag-id", "d", *NEW]) == 2
    assert capsys.readouterr().err.splitlines()[0] + "\n" == message
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before


def test_validating_one_file_still_finds_a_name_used_elsewhere(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "dup", "--dag-id", "d", "--from", "2025-01-01", "--to", "2025-01-02", *NEW]) == 0
    (tree / "specs" / "team").mkdir(exist_ok=True)
    (tree / "specs" / "team" / "dup.yaml").write_text((tree / "specs" / "dup.yaml").read_text())
    capsys.readouterr()
    assert main(["validate", "specs/team/dup.yaml"]) == 1
    assert (
        "specs/team/dup.yaml:3:7: $.name: name 'dup' is already used by specs/dup.yaml\n"
        "  hint: every spec needs a unique name across the specs tree\n"
    ) in capsys.readouterr().out


PROMOTE_WARNING = (
    "$.promote: warning: promote: true has no effect: the spec sets no execution.canary_runs\n"
    "  hint: promote lets a spec continue after its canary chunk; add `execution: {canary_runs: N}` or remove it\n"
)
RESUME_WARNING = (
    "$.resume: warning: resume has no effect: it names no stop (`stop #N`) and the spec sets no "
    "execution.halt_on_failure_ratio, so it never halts\n"
    '  hint: resume continues a Halted spec, or lifts the stop it names (`resume: "stop #3: why"`; `backfillctl '
    "stop list` shows the ids); add `execution: {halt_on_failure_ratio: 0.2}`, name a stop, or remove it\n"
)


def write_good(tree: Path, extra: str) -> None:
    (tree / "specs" / "good.yaml").write_text(SPEC.format(name="good", to="2025-01-07", reprocess="none") + extra)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("promote: true\n", "specs/good.yaml:12:10: " + PROMOTE_WARNING),
        ("execution: {chunk_runs: 2}\npromote: true\n", "specs/good.yaml:13:10: " + PROMOTE_WARNING),
        ('resume: "CHG-2 fix deployed"\n', "specs/good.yaml:12:9: " + RESUME_WARNING),
        ('execution: {canary_runs: 2}\nresume: "x"\n', "specs/good.yaml:13:9: " + RESUME_WARNING),
        (
            'promote: true\nresume: "x"\n',
            "specs/good.yaml:12:10: " + PROMOTE_WARNING + "specs/good.yaml:13:9: " + RESUME_WARNING,
        ),
        (
            "execution: {halt_on_failure_ratio: 1}\n",
            "specs/good.yaml:12:36: $.execution.halt_on_failure_ratio: warning: halt_on_failure_ratio 1 never "
            "halts: more than every finished run can never fail\n"
            "  hint: set a share below 1 (e.g. 0.2), or remove halt_on_failure_ratio\n",
        ),
        (
            "execution: {chunk_runs: 4, halt_min_finished: 2}\n",
            "specs/good.yaml:12:47: $.execution.halt_min_finished: warning: halt_min_finished has no effect: the "
            "spec sets no execution.halt_on_failure_ratio, so it never halts\n"
            "  hint: add `halt_on_failure_ratio: 0.2` beside it, or remove halt_min_finished\n",
        ),
    ],
    ids=["promote", "promote-chunked-no-canary", "resume", "resume-no-halt", "both", "halt-ratio-1", "min-no-halt"],
)
def test_execution_fields_without_effect_warn_and_pass(
    tree: Path, capsys: pytest.CaptureFixture[str], extra: str, expected: str
) -> None:
    write_good(tree, extra)
    count = expected.count(": warning: ")
    assert main(["validate", "specs/good.yaml"]) == 0
    assert capsys.readouterr().out == expected + f"OK: 1 spec valid (1 file, {count} warning{'s' * (count > 1)}).\n"


def test_promote_and_resume_with_their_execution_fields_pass_quietly(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_good(
        tree,
        'execution: {canary_runs: 2, halt_on_failure_ratio: 0.5, halt_min_finished: 1}\npromote: false\nresume: "x"\n',
    )
    assert main(["validate", "specs/good.yaml"]) == 0
    assert capsys.readouterr().out == "OK: 1 spec valid (1 file, 0 warnings).\n"


def test_a_policy_chunk_default_brings_no_canary_and_no_halt(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A policy's default chunk size chunks the spec but neither canaries nor halts it: both still warn."""
    (tree / "specs" / "policy.yaml").write_text(
        'version: 1\nrequire_reviewed_merge: false\nscope: {dags: ["*"]}\n'
        'rules:\n  - dags: ["orders_*"]\n    chunk_runs: {default: 24}\n'
    )
    write_good(tree, 'promote: true\nresume: "CHG-2 fix deployed"\n')
    assert main(["validate", "specs/good.yaml"]) == 0
    assert capsys.readouterr().out == (
        "specs/good.yaml:12:10: "
        + PROMOTE_WARNING
        + "specs/good.yaml:13:9: "
        + RESUME_WARNING
        + "OK: 1 spec valid (2 files including the policy specs/policy.yaml, 2 warnings).\n"
    )


def test_execution_warnings_do_not_hide_errors(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_good(tree, "expected_runs: 3\nexecution: {canary_runs: 4}\npromote: true\n")
    assert main(["validate", "specs/good.yaml", "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["summary"] == {"errors": 1, "warnings": 0}
    assert [(d["severity"], d["json_path"], d["message"]) for d in document["diagnostics"]] == [
        ("error", "$.execution.canary_runs", "execution.canary_runs 4 is more than expected_runs 3")
    ]


def test_files_json_cannot_carry_are_located_errors_and_the_rest_of_the_tree_is_still_validated(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 2 KB file nesting 1,000 lists and a 5,000-digit integer once exited 3 and stopped the whole tree."""
    specs = tree / "specs"
    (specs / "team" / "bad.yml").unlink()
    (specs / "future.yaml").unlink()
    good = SPEC.format(name="{name}", to="2025-01-07", reprocess="none")
    extra = {
        "deep": "dag_run_conf: {x: " + "[" * 1000 + "]" * 1000 + "}\n",
        "huge": "dag_run_conf: {x: " + "9" * 5000 + "}\n",
        "inf": "dag_run_conf: {x: 1e999}\n",
    }
    for name, text in extra.items():
        (specs / f"{name}.yaml").write_text(good.replace("{name}", name) + text)
    lone = good.replace("{name}", "lone").replace("A reason long enough.", '"A reason \\ud800 long enough."')
    (specs / "lone.yaml").write_text(lone)
    (specs / "policy.yaml").write_text('version: 1\nticket_pattern: "^CHG-[0-9]+\\udfff$"\n')
    assert main(["validate"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[0] for line in lines if not line.startswith("  hint")] == [
        "specs/deep.yaml:12:81",
        "specs/huge.yaml:12:19",
        "specs/inf.yaml:12:19",
        "specs/lone.yaml:9:9",
        "specs/policy.yaml:2:17",
        "5 errors, 0 warnings in 6 files.",
    ]
    assert lines[-2] == "  hint: write the character itself instead of \\u escapes of UTF-16 surrogates"
    capsys.readouterr()
    assert main(["validate", "specs/good.yaml"]) == 1  # the good spec passes; only the policy fails
    assert capsys.readouterr().out.splitlines()[-1] == "1 error, 0 warnings in 2 files."


def test_an_offline_validate_says_what_it_did_not_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dag_id: demo_dayly` is OK offline: the OK must not read as "the DAG ids were checked"."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "typo.yaml").write_text(
        "version: 1\nname: typo\ndag_id: demo_dayly\nfrom_date: '2025-01-01'\nto_date: '2025-01-02'\n"
        "reprocess_behavior: none\nmax_active_runs: 1\nticket: CHG-1\nreason: a reason for it\n"
        "requested_by: alice\napprovers: [bob]\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)
    assert main(["validate"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "OK: 1 spec valid (1 file, 0 warnings).\n"
    assert captured.err == "note: not checked: each spec's DAG in Airflow (BACKFILLCTL_AIRFLOW_URL is not set)\n"
    assert main(["validate", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == [
        "each spec's DAG in Airflow (BACKFILLCTL_AIRFLOW_URL is not set)"
    ]


def test_a_resume_naming_a_stop_is_the_documented_lift_and_no_warning(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`status` tells an owner to merge `resume: "stop #N: …"`: every later PR must not call it useless."""
    write_good(tree, 'resume: "stop #2: warehouse recovered"\n')
    assert main(["validate", "specs/good.yaml"]) == 0
    assert capsys.readouterr().out == "OK: 1 spec valid (1 file, 0 warnings).\n"
