"""The watch process's own evidence (`commands/loop/forge.py` over `adapters/github.py`), against a fake GitHub API on
loopback serving the real endpoints' shapes: the evidence the gate reads for a rebase, a squash whose commits are
not in the clone, a merge commit, a merge queue's merge, a direct push, and a commit GitHub fails for (held);
reviews over several pages (`Link`), a deleted account's review; rate limits waited for (`Retry-After`) or, past the
deadline, the commit held; a GitHub App's installation token; no token in any output."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest

from controller.adapters.github import AppKey, GitHubClient, GitHubUnavailable
from controller.cli import main
from controller.commands.loop.forge import EvidenceProvider, GitHubSettings
from controller.commands.reconcile.gate import EvidenceGiven
from controller.core.model.evidence import MergeMethod, ReviewState
from controller.core.model.secret import Secret
from controller.errors import ConfigError
from tests.commands.reconcile.forge import Forge, Merged, answer_merge, git
from tests.commands.reconcile.harness import Bench, in_process
from tests.commands.reconcile.test_gate_script import github_review
from tests.fakes.github import REPO, FakeGitHub, serving

TOKEN = "github_pat_fake_0123456789"


class World:
    """A specs repository with four merged pull requests (rebase, squash, merge, a merge queue's merge), a direct
    push and a commit GitHub fails for, and the fake GitHub's answers for them."""

    def __init__(self, bench: Bench) -> None:
        forge = Forge(bench)
        bench.policy("version: 1\nrequire_reviewed_merge: true\n")
        start = forge.commit("policy")
        bench.store.record_reconciled(start, None)
        self.merges: list[Merged] = []
        plan = (
            ("rebase", ("r-one", "r-two"), "carol"),
            ("squash", ("s-one",), "carol"),
            ("merge", ("m-one",), "carol"),
            ("merge", ("q-one",), "github-merge-queue"),  # the queue merges main and the head in its own commit
        )
        for method, names, merger in plan:
            pull = forge.open()
            for name in names:
                if name.endswith("one"):
                    bench.spec(name, dag="demo_tz")
                else:
                    bench.spec(name, dag="demo_hourly", start="2025-01-01T00:00:00Z", end="2025-01-01T02:00:00Z")
                forge.push(pull, f"add {name}")
            self.merges.append(forge.merge(pull, method, merger=merger))
        bench.spec("pushed", dag="demo_daily")
        self.pushed = forge.commit("pushed on main")
        bench.spec("outage", dag="demo_daily", start="2025-02-01", end="2025-02-02")
        self.outage = forge.commit("GitHub cannot say")
        self.github = FakeGitHub(token=TOKEN, page_size=2)
        answers = self.github.answers
        answers[f"{REPO}/commits/{self.pushed}/pulls"] = []
        for merged in self.merges:
            reviews = [
                github_review("dave", "COMMENTED", merged.pull.head, merged.pull.number * 10),
                github_review(None, "COMMENTED", merged.pull.head, 1),  # a deleted account
                github_review("erin", "PENDING", merged.pull.head, merged.pull.number * 10 + 1),
                github_review("bob", "APPROVED", merged.pull.head, merged.pull.number * 10 + 2),  # second page
            ]
            answer_merge(answers, bench.root, merged, reviews)
        answers[f"{REPO}/collaborators/bob/permission"] = {"permission": "write", "role_name": "write"}
        answers[f"{REPO}/collaborators/dave/permission"] = {"permission": "read", "role_name": "read"}
        self.github.failures[f"{REPO}/commits/{self.outage}/pulls"] = [(502, {}, {"message": "Bad Gateway"})] * 2
        # the squash's branch is deleted after the merge, as GitHub offers: its commits leave the clone
        squash = self.merges[1].pull
        git(bench.root, "branch", "-q", "-D", squash.branch)
        git(bench.root, "reflog", "expire", "--expire=now", "--all")
        git(bench.root, "gc", "-q", "--prune=now")


@pytest.fixture
def world(bench: Bench) -> World:
    return World(bench)


def provider(bench: Bench, github: FakeGitHub, auth: Any = None, **kwargs: Any) -> EvidenceProvider:
    client = GitHubClient("acme/specs", auth or Secret(TOKEN), api_url=github.url, **kwargs)
    return EvidenceProvider(bench.settings(), client)


def test_the_provider_reads_what_the_script_reads_and_the_gate_decides_with_it(bench: Bench, world: World) -> None:
    with serving(world.github) as github:
        made = provider(bench, github)
        given = made.given(EvidenceGiven())
        made.close()
    merges = world.merges
    documents = given.documents
    assert [(d.change.number if d.change else None, d.commit) for d in documents] == [
        (41, merges[0].merge_sha),
        (42, merges[1].merge_sha),
        (43, merges[2].merge_sha),
        (44, merges[3].merge_sha),
        (None, world.pushed),
    ]
    assert [
        (d.change.merge_method, d.change.base_sha, d.change.head_sha) for d in documents if d.change is not None
    ] == [(MergeMethod(m.method), m.base_sha, m.pull.head) for m in merges]
    assert given.unavailable == (world.outage,)
    first = documents[0]
    assert [(r.reviewer, r.state, r.permission, r.review_id) for r in first.reviews] == [
        ("dave", ReviewState.COMMENTED, "read", 410),
        ("bob", ReviewState.APPROVED, "write", 412),
    ]  # the deleted account's review skipped, the pending one too; bob's came on the second page
    assert first.change is not None
    assert first.change.url == "https://github.com/acme/specs/pull/41"
    assert first.change.author == "alice"
    # the squash's commits are gone from the clone: their authors come from GitHub; the others' from git
    assert documents[1].authors == {"specs/s-one.yaml": ("alice@users.noreply.github.com",)}
    assert [d.authors for d in documents if d is not documents[1]] == [None] * 4
    pages = [a.path for a in world.github.requests if a.path == f"{REPO}/pulls/41/reviews"]
    assert len(pages) == 2  # two reviews a page: the Link header led to the second
    reconciler = bench.reconciler()
    reconciler.evidence = given
    result = reconciler.run_once()
    assert [r.split(":")[0] for r in result.refused] == ["pushed"]  # pushed without a pull request
    held = {i.spec: i.reason for i in result.plan.items if i.reason.startswith("held:")}
    assert list(held) == ["outage"]
    assert bench.fake is not None
    assert sorted(b["dag_id"] for b in bench.fake.backfills.values()) == ["demo_hourly", "demo_tz"]


def test_what_was_read_is_not_asked_again_and_an_outage_is_asked_next_pass(bench: Bench, world: World) -> None:
    with serving(world.github) as github:
        made = provider(bench, github)
        made.given(EvidenceGiven())
        asked = len(github.requests)
        again = made.given(EvidenceGiven())
        made.close()
    later = [a.path for a in github.requests[asked:]]
    assert later == [f"{REPO}/commits/{world.outage}/pulls"]  # the 502s are used up: now it answers (404)
    assert again.unavailable == (world.outage,)


def test_a_given_document_is_not_fetched_again(bench: Bench, world: World) -> None:
    with serving(world.github) as github:
        made = provider(bench, github)
        first = made.given(EvidenceGiven())
        github.requests.clear()
        static = EvidenceGiven(first.documents[:1], (world.outage,))
        given = made.given(static)
        made.close()
    assert given.documents[0] is first.documents[0]
    assert given.unavailable == (world.outage,)
    assert [a.path for a in github.requests] == []


def test_a_rate_limit_is_waited_for_within_the_deadline(bench: Bench, world: World) -> None:
    path = f"{REPO}/commits/{world.pushed}/pulls"
    world.github.failures[path] = [
        (429, {"Retry-After": "3"}, {"message": "You have exceeded a secondary rate limit."}),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "0"}, {"message": "API rate limit exceeded"}),
    ]
    slept: list[float] = []
    with serving(world.github) as github:
        made = provider(bench, github, sleep=slept.append)
        given = made.given(EvidenceGiven())
        made.close()
    assert slept == [3.0, 1.0]  # Retry-After; then a reset already past: one second
    assert world.pushed in [d.commit for d in given.documents]


def test_a_rate_limit_past_the_deadline_holds_that_commit(
    bench: Bench, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    path = f"{REPO}/commits/{world.pushed}/pulls"
    world.github.failures[path] = [
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9999999999"}, {"message": "API rate limit"}),
    ]
    slept: list[float] = []
    with serving(world.github) as github, caplog.at_level(logging.WARNING):
        made = provider(bench, github, sleep=slept.append)
        given = made.given(EvidenceGiven())
        made.close()
    assert slept == []
    assert given.unavailable == (world.pushed, world.outage)
    said = [r.getMessage() for r in caplog.records if r.name == "controller.commands.loop.forge"]
    assert said[0].startswith(f"evidence of {world.pushed[:12]} is unavailable, its changes are held: GET {path}: ")
    assert said[0].endswith("past this pass's deadline")
    assert said[1] == (
        f"evidence of {world.outage[:12]} is unavailable, its changes are held: GET {REPO}/commits/"
        f"{world.outage}/pulls failed: HTTP 502: Bad Gateway"
    )


def test_a_github_app_gets_a_repository_scoped_read_only_installation_token(
    bench: Bench, world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = tmp_path / "app.pem"
    subprocess.run(["openssl", "genrsa", "-traditional", "-out", str(key), "2048"], check=True, capture_output=True)
    app = AppKey.from_file("1234", key)
    n, e, _ = app.numbers(str(key))
    world.github.app = ("1234", (n, e))
    world.github.token = "not yet"  # only the installation token is accepted, once made
    with serving(world.github) as github, caplog.at_level(logging.DEBUG):
        made = provider(bench, github, auth=app)
        given = made.given(EvidenceGiven())
        made.close()
    assert len(given.documents) == 5
    first, second = github.requests[:2]
    assert (first.method, first.path) == ("GET", f"{REPO}/installation")
    assert (second.method, second.path) == ("POST", "/app/installations/7/access_tokens")
    assert second.body == {
        "repositories": ["specs"],
        "permissions": {"contents": "read", "pull_requests": "read", "metadata": "read"},
    }
    assert {a.authorization for a in github.requests[2:]} == {f"Bearer {github.installation_token}"}
    assert [a.path for a in github.requests].count(f"{REPO}/installation") == 1  # the token is kept until it expires
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert github.installation_token not in logged
    assert "BEGIN RSA PRIVATE KEY" not in repr(app)


def test_a_key_that_is_no_rsa_key_or_an_app_id_that_is_no_number_is_refused_at_start(tmp_path: Path) -> None:
    key = tmp_path / "app.pem"
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n")
    with pytest.raises(ConfigError) as caught:
        AppKey.from_file("1234", key)
    assert caught.value.message == (
        f"BACKFILLCTL_GITHUB_APP_KEY_FILE={key}: not a usable RSA private key (not a DER RSA private key)"
    )
    with pytest.raises(ConfigError) as caught:
        AppKey.from_file("my-app", key)
    assert caught.value.message == "BACKFILLCTL_GITHUB_APP_ID='my-app' is not a GitHub App id"
    with pytest.raises(ConfigError) as caught:
        AppKey.from_file("1234", tmp_path / "missing.pem")
    assert caught.value.message == (
        f"BACKFILLCTL_GITHUB_APP_KEY_FILE={tmp_path / 'missing.pem'}: cannot read the App's private key "
        "(No such file or directory)"
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"BACKFILLCTL_GITHUB_TOKEN": "x"}, "BACKFILLCTL_GITHUB_REPOSITORY is not set, but GitHub credentials are"),
        ({"BACKFILLCTL_GITHUB_REPOSITORY": "acme/specs"}, "BACKFILLCTL_GITHUB_REPOSITORY is set, but no GitHub "),
        (
            {"BACKFILLCTL_GITHUB_REPOSITORY": "acme/specs", "BACKFILLCTL_GITHUB_APP_ID": "1"},
            "a GitHub App needs both BACKFILLCTL_GITHUB_APP_ID and BACKFILLCTL_GITHUB_APP_KEY_FILE",
        ),
    ],
)
def test_half_a_github_setting_is_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GitHubSettings.from_env(env)
    assert caught.value.message.startswith(message)


def test_no_github_setting_fetches_nothing() -> None:
    assert GitHubSettings.from_env({"BACKFILLCTL_GITHUB_API_URL": "https://ghe.example/api/v3"}) is None


def test_a_next_page_on_another_origin_is_not_followed(bench: Bench) -> None:
    github = FakeGitHub(token=TOKEN)
    github.failures[f"{REPO}/pulls/1/reviews"] = [(200, {"Link": '<https://evil.example/x>; rel="next"'}, [])]
    with (
        serving(github),
        GitHubClient("acme/specs", Secret(TOKEN), api_url=github.url) as client,
        pytest.raises(GitHubUnavailable) as caught,
    ):
        client.reviews(1)
    assert caught.value.message == f"the next page of {REPO}/pulls/1/reviews is on another origin"
    assert len(github.requests) == 1


def test_reconcile_once_fetches_its_evidence_and_shows_no_token(
    bench: Bench, world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    in_process(bench, monkeypatch)
    monkeypatch.chdir(bench.root)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    with serving(world.github) as github:
        monkeypatch.setenv("BACKFILLCTL_GITHUB_REPOSITORY", "acme/specs")
        monkeypatch.setenv("BACKFILLCTL_GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("BACKFILLCTL_GITHUB_API_URL", github.url)
        code = main(["reconcile", "--once"])
    out, err = capsys.readouterr()
    assert code == 5  # `pushed` is refused: pushed without a pull request
    assert TOKEN not in out + err
    assert f"evidence of {world.outage[:12]} is unavailable, its changes are held" in err
    assert bench.fake is not None
    assert sorted(b["dag_id"] for b in bench.fake.backfills.values()) == ["demo_hourly", "demo_tz"]


def test_reconcile_refuses_half_a_github_setting(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    in_process(bench, monkeypatch)
    monkeypatch.setenv("BACKFILLCTL_GITHUB_REPOSITORY", "acme/specs")
    assert main(["reconcile", "--once"]) == 1
    assert capsys.readouterr().err.startswith(
        "error: BACKFILLCTL_GITHUB_REPOSITORY is set, but no GitHub credentials are\n"
    )


def test_a_rate_limit_that_never_ends_is_waited_for_five_times_only() -> None:
    github = FakeGitHub(token=TOKEN)
    github.failures[f"{REPO}/pulls/1"] = [(429, {"Retry-After": "0"}, {"message": "slow down"})] * 9
    slept: list[float] = []
    with (
        serving(github),
        GitHubClient("acme/specs", Secret(TOKEN), api_url=github.url, sleep=slept.append) as client,
        pytest.raises(GitHubUnavailable) as caught,
    ):
        client.pull(1)
    assert caught.value.message == f"GET {REPO}/pulls/1: still rate limited after 5 waits"
    assert slept == [0.0] * 5
    assert len(github.requests) == 6
