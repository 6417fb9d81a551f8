"""Forge logins (pure): GitHub's logins are case-insensitive (`Alice` and `alice` are one account), so every
comparison of approvers, owners, reviewers, authors and stop actors goes through these."""

from __future__ import annotations

from collections.abc import Iterable


def login_key(login: str) -> str:
    """The form two logins are compared in."""
    return login.casefold()


def same_login(one: str, other: str) -> bool:
    return login_key(one) == login_key(other)


def one_of(login: str, logins: Iterable[str]) -> bool:
    return any(same_login(login, other) for other in logins)
