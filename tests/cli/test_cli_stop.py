"""`backfillctl stop`: exact output and exit codes of its list, its lift and the user's mistakes (never exit 3)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.cli import main
from controller.commands.runtime import session
from controller.core.model.stops import EmergencyStopKind, StopSource
from tests.fakes.airflow import FakeAirflow
from tests.support.oidc_issuer import ISSUED, REPOSITORY, WORKFLOW, claims, issuer, part, rsa_key, token


@pytest.fixture
def store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path}/state.db"
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "policy.yaml").write_text(
        "version: 1\ndownstream:\n  warehouse: {max_active_runs: 8, owners: [wh-oncall]}\n"
    )
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", url)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", str(specs))
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "someone")
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    Store(url).close()
    return url


def test_list_and_an_owners_lift(
    store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["stop", "list"]) == 0
    assert capsys.readouterr() == ("no stops in force\n", "")
    with Store(store_url) as store:
        store.add_stop(EmergencyStopKind.DOWNSTREAM, "warehouse", "CPU at 95%", "wh-oncall", source=StopSource.CLI)
    assert main(["stop", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("#1 downstream warehouse: CPU at 95% — by wh-oncall (cli) at ")
    assert lines[1] == (
        "note: a cli stop's actor is only as trustworthy as the store credentials used (a workflow stop's is GitHub's, "
        "proven by the job's OIDC token)"
    )
    assert main(["stop", "lift", "warehouse"]) == 5
    assert capsys.readouterr().err == (
        "error: lift stop #1: only wh-oncall may; the actor is someone\n"
        "  hint: ask an owner; a stop also lifts at its expiry or when a reviewed `resume` names it "
        "(on-call logins may stop, never lift)\n"
    )
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "wh-oncall")
    assert main(["stop", "lift", "#1", "--reason", "load is down"]) == 0
    assert capsys.readouterr() == (
        "lifted stop #1 of downstream warehouse (by wh-oncall: load is down)\n"
        "the next reconcile pass resumes what it paused\n",
        "",
    )


DEPRECATION = (
    r"\S+Z warning: `stop {old}` is deprecated and goes away in a later release: use `{new}`\n"  # one line, timed
)


def test_the_old_spellings_still_work_with_one_line_saying_the_new_one(
    store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["stop", "--list"]) == 0
    out, err = capsys.readouterr()
    assert out == "no stops in force\n"
    assert re.fullmatch(DEPRECATION.format(old="--list", new="backfillctl stop list"), err)
    with Store(store_url) as store:
        store.add_stop(EmergencyStopKind.DOWNSTREAM, "warehouse", "CPU at 95%", "wh-oncall", source=StopSource.CLI)
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "wh-oncall")
    assert main(["stop", "--lift", "warehouse", "--reason", "load is down"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "lifted stop #1 of downstream warehouse (by wh-oncall: load is down)"
    new = re.escape("backfillctl stop lift NAME|SYSTEM|#N --reason …")
    assert re.fullmatch(DEPRECATION.format(old="--lift", new=new), err)
    with Store(store_url, read_only=True) as store:
        assert store.stops() == ()


def test_the_group_reads_as_one_command(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`stop --help` is the stop's own help, its usage the group's (`backfillctl stop`); `list` and `lift` are
    commands of the group; the deprecated options are not offered."""
    assert main(["stop", "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Usage: backfillctl stop [OPTIONS] [NAME]\n")
    words = " ".join(text.split())  # as wrapped to the terminal
    assert "until an owner lifts it (`backfillctl stop lift`)" in words
    assert "`backfillctl stop list` shows the stops in force" in words
    assert "--lift" not in text
    assert "--list" not in text
    assert main(["stop", "lift", "--help"]) == 0
    assert capsys.readouterr().out.startswith("Usage: backfillctl stop lift [OPTIONS] NAME|SYSTEM|#N\n")
    assert main(["stop", "lift"]) == 2
    assert "Missing argument 'NAME|SYSTEM|#N'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "code", "err"),
    [
        (
            ["stop", "--reason", "x y z"],
            2,
            "error: stop needs one target: a spec NAME, --downstream SYSTEM or --all\n"
            '  hint: e.g. backfillctl stop --downstream warehouse --reason "CPU at 95%" --expires 4h\n',
        ),
        (
            ["stop", "--downstream", "warehouse"],
            2,
            'error: stop needs --reason: say why, for the owners and the audit log\n  hint: --reason "CPU at 95%"\n',
        ),
        (
            ["stop", "lift", "nope"],
            2,
            "error: stop lift nope: no stop in force names 'nope'\n  hint: stops in force: none\n",
        ),
        (
            ["stop", "--source", "github", "--all"],
            2,
            "error: --source github: the source is cli or workflow\n",
        ),
    ],
)
def test_user_mistakes_say_what_and_how_to_fix(
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    code: int,
    err: str,
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert main(args) == code
    assert capsys.readouterr().err == err


def test_a_bad_duration_is_a_usage_error(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stop", "--downstream", "warehouse", "--reason", "why not", "--expires", "soon"]) == 2
    assert "'soon' is not a duration; use e.g. 30m, 4h or 2d" in capsys.readouterr().err


# --- a workflow stop is proven by the job's OIDC token -------------------------------------------------------------

TRUSTED = "version: 1\ndownstream:\n  warehouse: {{max_active_runs: 8, owners: [wh-owner]}}\n" + (
    "stop_workflow: {{repository: {repository}, workflow: {workflow}, issuer: '{issuer}'}}\n"
)
STOP = ["stop", "--source", "workflow", "--downstream", "warehouse", "--reason", "CPU at 95%"]


@pytest.fixture
def proving(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The stop command on a fake Airflow, with a loopback issuer of key github-1 and the last reconciled policy
    naming the stop workflow there; yields the issuer's URL."""
    airflow = FakeAirflow()
    monkeypatch.setattr(
        session, "make_client", lambda s, **_kw: AirflowClient("http://fake", transport=airflow.transport())
    )
    with issuer(rsa_key("github-1")) as url:
        trusted = TRUSTED.format(repository=REPOSITORY, workflow=WORKFLOW, issuer=url)
        (Path(store_url.removeprefix("sqlite:///")).parent / "specs" / "policy.yaml").write_text(trusted)  # main's
        with Store(store_url) as store:
            store.record_reconciled(None, trusted)
        yield url


def run_stop(
    store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], oidc: str | None
) -> tuple[int, str, tuple[str, str, str]]:
    """`stop --source workflow` with `oidc` as BACKFILLCTL_OIDC_TOKEN: exit code, output, (source, actor, the
    stop's audit message)."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # what anyone can set: it proves nothing
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "wh-owner")  # nor does the name of an owner
    if oidc is None:
        monkeypatch.delenv("BACKFILLCTL_OIDC_TOKEN", raising=False)
    else:
        monkeypatch.setenv("BACKFILLCTL_OIDC_TOKEN", oidc)
    code = main(STOP)
    out = capsys.readouterr().out
    with Store(store_url, read_only=True) as store:
        (stop,) = store.stops()
        (message,) = [e.entry.message for e in store.events() if e.entry.action == "stop"]
    return code, out, (stop.source.value, stop.actor, message or "")


def now_claims(url: str, **changed: Any) -> dict[str, Any]:
    return claims(url, at=int(time.time()), **changed)


def test_the_stop_workflows_token_records_a_workflow_stop_by_its_actor(
    proving: str, store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, recorded = run_stop(store_url, monkeypatch, capsys, token(rsa_key("github-1"), now_claims(proving)))
    assert code == 0
    held = "; holds no spec yet"  # a system's stop names the specs it holds: none in this repository yet
    assert recorded == (
        "workflow",
        "wh-owner",
        f"stop #1 of downstream warehouse by wh-owner (workflow): CPU at 95%{held}",
    )
    assert out.splitlines()[0] == "stop #1 of downstream warehouse by wh-owner (workflow) until an owner lifts it"
    assert ISSUED[proving] == ["/.well-known/jwks"]
    assert "BACKFILLCTL_OIDC_TOKEN" not in out


@pytest.mark.parametrize(
    ("forge", "reason"),
    [
        (lambda url: None, "no BACKFILLCTL_OIDC_TOKEN was given"),
        (
            lambda url: token(rsa_key("mallory"), now_claims(url), kid="github-1"),
            "the token's signature does not verify with the issuer's key 'github-1'",
        ),
        (
            lambda url: token(rsa_key("github-1"), now_claims(url, aud="sts.amazonaws.com")),
            "the token's audience is 'sts.amazonaws.com', not backfillctl",
        ),
        (
            lambda url: token(rsa_key("github-1"), now_claims(url, exp=int(time.time()) - 3600)),
            "the token expired 3600 s ago",
        ),
        (
            lambda url: f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(now_claims(url))}.",
            "the token's algorithm is 'none', not RS256",
        ),
        (
            lambda url: token(rsa_key("github-1"), now_claims(url, repository="mallory/specs")),
            f"the token's repository is 'mallory/specs', not {REPOSITORY}",
        ),
        (
            lambda url: token(
                rsa_key("github-1"), now_claims(url, job_workflow_ref=f"{REPOSITORY}/.github/workflows/x.yml@main")
            ),
            f"the token's job_workflow_ref is '{REPOSITORY}/.github/workflows/x.yml@main', not {WORKFLOW}@…",
        ),
    ],
    ids=["no-token", "another-key", "audience", "expired", "alg-none", "repository", "workflow"],
)
def test_a_forged_workflow_stop_is_recorded_as_cli_with_the_claim(
    proving: str,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    forge: Any,
    reason: str,
) -> None:
    """The stop still happens (a stop only reduces the load), as a cli stop by the claimed actor, saying what it
    claimed."""
    code, out, recorded = run_stop(store_url, monkeypatch, capsys, forge(proving))
    if found := re.search(r"expired (\d+) s ago", recorded[2]):  # a loaded machine's clock moved on since it was made
        assert 3600 <= int(found[1]) < 3660
        recorded, out = (
            (*recorded[:2], recorded[2].replace(found[0], "expired 3600 s ago")),
            out.replace(found[0], "expired 3600 s ago"),
        )
    claim = f"claimed source workflow, not proven: {reason}"
    assert code == 0
    message = f"stop #1 of downstream warehouse by wh-owner (cli): CPU at 95%; holds no spec yet ({claim})"
    assert recorded == ("cli", "wh-owner", message)
    assert out.splitlines()[:2] == [
        "stop #1 of downstream warehouse by wh-owner (cli) until an owner lifts it",
        f"  note: {claim}; recorded as cli",
    ]


def test_an_unsigned_token_fetches_no_keys(
    proving: str, store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    unsigned = f"{part({'alg': 'none'})}.{part(now_claims(proving))}."
    assert run_stop(store_url, monkeypatch, capsys, unsigned)[2][0] == "cli"
    assert ISSUED[proving] == []


def test_the_last_reconciled_policy_decides_not_the_local_one(
    proving: str, store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A local policy naming another repository (one whose run the stopper controls) proves nothing."""
    local = TRUSTED.format(repository="mallory/specs", workflow=".github/workflows/stop.yml", issuer=proving)
    (tmp_path / "specs" / "policy.yaml").write_text(local)
    mine = now_claims(
        proving, repository="mallory/specs", job_workflow_ref="mallory/specs/.github/workflows/stop.yml@x"
    )
    recorded = run_stop(store_url, monkeypatch, capsys, token(rsa_key("github-1"), mine))[2]
    assert recorded[:2] == ("cli", "wh-owner")
    assert recorded[2].endswith(
        f"(claimed source workflow, not proven: the token's repository is 'mallory/specs', not {REPOSITORY})"
    )


def test_without_a_reconciled_stop_workflow_or_a_reachable_issuer_nothing_is_proven(
    store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    airflow = FakeAirflow()
    monkeypatch.setattr(
        session, "make_client", lambda s, **_kw: AirflowClient("http://fake", transport=airflow.transport())
    )
    unreachable = TRUSTED.format(repository=REPOSITORY, workflow=WORKFLOW, issuer="http://127.0.0.1:1")
    (Path(store_url.removeprefix("sqlite:///")).parent / "specs" / "policy.yaml").write_text(unreachable)
    valid = token(rsa_key("github-1"), now_claims("http://127.0.0.1:1"))
    recorded = run_stop(store_url, monkeypatch, capsys, valid)[2]
    assert recorded[2].endswith(
        "(claimed source workflow, not proven: the policy at the last reconciled commit names no stop_workflow)"
    )
    with Store(store_url) as store:
        store.lift_stop(store.stops()[0].id, "someone", "next case")
        store.record_reconciled(None, unreachable)
    code = main(STOP)
    assert code == 0
    with Store(store_url, read_only=True) as store:
        message = [e.entry.message for e in store.events() if e.entry.action == "stop"][-1]
    assert message is not None
    assert message.endswith(
        "(claimed source workflow, not proven: the issuer's keys at http://127.0.0.1:1/.well-known/jwks could not be "
        "read (ConnectError))"
    )


def test_a_proven_actor_who_is_no_owner_is_refused(
    proving: str, store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "wh-owner")  # the environment says an owner; the token says who ran it
    mallory = now_claims(proving, actor="mallory", triggering_actor="mallory")
    monkeypatch.setenv("BACKFILLCTL_OIDC_TOKEN", token(rsa_key("github-1"), mallory))
    assert main(STOP) == 5
    assert capsys.readouterr().err == (
        "error: stop downstream warehouse: only wh-owner may; the actor is mallory\n"
        "  hint: ask an owner or the on-call, or pause the backfill in Airflow (the next pass records it as a stop)\n"
    )
