"""The watch process finds its own evidence: before each pass, for each merged commit `evidence needed` lists that
no given document (`--evidence`) covers, the gate's evidence is read from GitHub's API (`adapters/github.py`), as
`.github/scripts/evidence` reads it: the commit's merged pull request, its reviews (every page), each reviewer's
permission, and the merge method from this clone's history. A commit GitHub cannot answer for (an outage, a rate
limit past the pass's deadline) is given as unavailable: the gate holds what it changed, and asks again next pass.

Configured by `BACKFILLCTL_GITHUB_REPOSITORY` (OWNER/NAME) with a GitHub App (`BACKFILLCTL_GITHUB_APP_ID`,
`BACKFILLCTL_GITHUB_APP_KEY_FILE`) or a fine-grained read-only token (`BACKFILLCTL_GITHUB_TOKEN`);
`BACKFILLCTL_GITHUB_API_URL` for GitHub Enterprise Server. Without them nothing is fetched.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.adapters.githistory import GitHistory
from controller.adapters.github import API_URL, AppKey, Auth, GitHubClient, GitHubError
from controller.adapters.gitsource import GitSource
from controller.commands.reconcile.evidence import needed
from controller.commands.reconcile.gate import EvidenceGiven
from controller.commands.runtime.settings import Settings
from controller.core.documents.escaping import plain
from controller.core.model.evidence import Evidence, ForgeReview, MergedChange, MergeMethod, ReviewState
from controller.core.model.secret import Secret
from controller.errors import ConfigError

log = logging.getLogger(__name__)
PREFIX = "BACKFILLCTL_GITHUB_"
FETCH_S = 120.0  # what one pass may spend fetching evidence (rate-limit waits included)
MAX_COMMITS = 250  # GitHub lists no more of a pull request's commits


@dataclass(frozen=True, slots=True)
class GitHubSettings:
    repository: str
    auth: Auth
    api_url: str = API_URL

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GitHubSettings | None:
        """The provider's settings (None: BACKFILLCTL_GITHUB_REPOSITORY unset, nothing is fetched)."""

        def get(name: str) -> str:
            return env.get(PREFIX + name, "").strip()

        repository = get("REPOSITORY")
        app_id, key_file, token = get("APP_ID"), get("APP_KEY_FILE"), get("TOKEN")
        if not repository:
            if app_id or key_file or token:
                raise ConfigError(
                    "BACKFILLCTL_GITHUB_REPOSITORY is not set, but GitHub credentials are",
                    hint="name the specs repository (OWNER/NAME) the evidence is read from",
                )
            return None
        auth: Auth
        if app_id or key_file:
            if not (app_id and key_file):
                raise ConfigError(
                    "a GitHub App needs both BACKFILLCTL_GITHUB_APP_ID and BACKFILLCTL_GITHUB_APP_KEY_FILE",
                    hint="set both (docs/deploy.md), or a fine-grained token in BACKFILLCTL_GITHUB_TOKEN",
                )
            auth = AppKey.from_file(app_id, Path(key_file))
        elif token:
            auth = Secret(token)
        else:
            raise ConfigError(
                "BACKFILLCTL_GITHUB_REPOSITORY is set, but no GitHub credentials are",
                hint="a GitHub App (BACKFILLCTL_GITHUB_APP_ID, BACKFILLCTL_GITHUB_APP_KEY_FILE) or a fine-grained "
                "read-only token (BACKFILLCTL_GITHUB_TOKEN); docs/deploy.md",
            )
        return cls(repository, auth, get("API_URL") or API_URL)


class EvidenceProvider:
    """Fetches the evidence each pass needs; what it read is kept for the process (a merged change's evidence is
    read once), what it could not read is asked again next pass."""

    def __init__(
        self,
        settings: Settings,
        client: GitHubClient,
        *,
        budget: float = FETCH_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings, self.client, self.budget, self.monotonic = settings, client, budget, monotonic
        self.known: dict[str, Evidence] = {}  # commit → its evidence (a rebase's commits share one document)
        self.pulls: dict[int, Evidence] = {}  # pull request number → its evidence (read once)

    def close(self) -> None:
        self.client.close()

    def given(self, static: EvidenceGiven) -> EvidenceGiven:
        """`static` (the command line's), with the evidence of every other commit that needs one."""
        covered = {doc.commit for doc in static.documents} | set(static.unavailable)
        wanted = [c["sha"] for c in needed(self.settings)["commits"] if c["sha"] not in covered]
        if not wanted:
            return static
        history = GitSource(self.settings.specs_dir).history
        self.client.deadline = self.monotonic() + self.budget
        documents: dict[str, Evidence] = {}
        unavailable: list[str] = []
        for sha in wanted:
            if sha not in self.known:
                try:
                    self._fetch(sha, history)
                except GitHubError as exc:
                    log.warning("evidence of %s is unavailable, its changes are held: %s", sha[:12], plain(exc.message))
                    unavailable.append(sha)
                    continue
            doc = self.known[sha]
            documents[doc.commit] = doc
        return EvidenceGiven((*static.documents, *documents.values()), (*static.unavailable, *unavailable))

    def _fetch(self, sha: str, history: GitHistory) -> None:
        pulls = [p for p in self.client.commit_pulls(sha) if p.get("merged_at")]
        merged = [p for p in pulls if p.get("merge_commit_sha") == sha] + pulls
        if not merged:  # it reached the branch without a pull request
            self.known[sha] = Evidence("github", sha, None, (), source=f"GitHub: commit {sha[:12]}")
            return
        number = int(merged[0]["number"])
        if number in self.pulls:  # another commit of a rebased pull request already read
            self.known[sha] = self.pulls[number]
            return
        pull = self.client.pull(number)
        merge = str(pull.get("merge_commit_sha") or sha)
        method, base = _method(self.client, history, number, merge, int(pull.get("commits") or 1))
        head = str(pull.get("head", {}).get("sha") or "")
        change = MergedChange(
            number,
            str(pull.get("html_url") or ""),
            str((pull.get("user") or {}).get("login") or ""),
            base,
            head or None,
            merge,
            method,
        )
        reviews = self._reviews(number)
        authors = None
        if head and not history.has_commit(head):  # a squash: its commits are not on the branch
            authors = self._authors(number, history)
        doc = Evidence("github", merge, change, reviews, f"GitHub: pull request #{number}", authors)
        self.known[sha] = self.known[merge] = self.pulls[number] = doc

    def _reviews(self, number: int) -> tuple[ForgeReview, ...]:
        raw = [r for r in self.client.reviews(number) if r.get("state") != "PENDING"]
        logins = sorted({login for r in raw if isinstance(login := (r.get("user") or {}).get("login"), str)})
        permissions = {login: self.client.permission(login) for login in logins}
        states = {s.value.upper(): s for s in ReviewState}
        reviews = []
        for review in raw:
            login = (review.get("user") or {}).get("login")
            state = states.get(str(review.get("state")))
            if not isinstance(login, str) or state is None:  # a deleted account's review has no user
                continue
            reviews.append(
                ForgeReview(
                    review.get("id") if isinstance(review.get("id"), int) else None,
                    login,
                    state,
                    str(review.get("commit_id") or ""),
                    permissions.get(login),
                    str(review.get("submitted_at") or ""),
                )
            )
        return tuple(reviews)

    def _authors(self, number: int, history: GitHistory) -> dict[str, tuple[str, ...]]:
        """Path (repository-relative, under the specs folder) → e-mails of the authors of the pull request's commits
        that touched it, merges left out: what `GitSource.authors_since` reads when the commits are in the clone."""
        prefix = history.relative(self.settings.specs_dir)
        under = "" if prefix in ("", ".") else prefix + "/"
        found: dict[str, set[str]] = {}
        for listed in self.client.pull_commits(number)[:MAX_COMMITS]:
            commit = self.client.commit(str(listed.get("sha")))
            if len(commit.get("parents") or []) > 1:
                continue
            email = str(((commit.get("commit") or {}).get("author") or {}).get("email") or "")
            for changed in commit.get("files") or []:
                name = changed.get("filename") if isinstance(changed, dict) else None
                if isinstance(name, str) and name.startswith(under):
                    found.setdefault(name, set()).add(email)
        return {path: tuple(sorted(emails)) for path, emails in found.items()}


def _method(
    client: GitHubClient, history: GitHistory, number: int, merge: str, commits: int
) -> tuple[MergeMethod, str]:
    """How the change landed, and the branch's commit it landed on (as `.github/scripts/evidence` tells them)."""
    parents = history.parents(merge)
    first = parents[0] if parents else ""
    if len(parents) > 1:
        return MergeMethod.MERGE, first
    if commits > 1 and first and any(_number(p) == number for p in client.commit_pulls(first)):
        base = merge
        for _ in range(commits):  # each commit rebased onto the branch, the last is the merge
            base = history.first_parent(base) or ""
            if not base:
                break
        return MergeMethod.REBASE, base
    return MergeMethod.SQUASH, first  # one commit: a squash and a rebase land the same


def _number(pull: Mapping[str, Any]) -> int | None:
    value = pull.get("number")
    return value if isinstance(value, int) else None


def open_provider(settings: Settings) -> EvidenceProvider | None:
    """The provider the settings ask for (None: no BACKFILLCTL_GITHUB_REPOSITORY)."""
    github = GitHubSettings.from_env(settings.environ)
    if github is None:
        return None
    client = GitHubClient(github.repository, github.auth, api_url=github.api_url)
    return EvidenceProvider(settings, client)


@contextlib.contextmanager
def provided(settings: Settings) -> Iterator[EvidenceProvider | None]:
    """`open_provider`, closed at the end."""
    provider = open_provider(settings)
    try:
        yield provider
    finally:
        if provider is not None:
            provider.close()
