"""Least privilege: what the Airflow identity backfillctl runs as may do beyond what it needs, as far as
Airflow lets a client tell. Pure: the token's claims and the answer of one read are parameters.

What the API can tell: SimpleAuthManager (Airflow 3's default) writes the user's role into the JWT it issues
(`{"sub": "admin", "role": "admin", …}`), so the role is known exactly, with no call. Other auth managers (FAB,
Keycloak, …) put no role in the token, and Airflow 3.3 has no endpoint that names a user's role or permissions
(`/ui/auth/me` gives the id and name only; `/ui/auth/menus` is not filtered by SimpleAuthManager): there, one read
backfillctl never needs, `GET /api/v2/connections`, answering 200 shows that the identity may read connections
(their passwords included), which is more than the `user` role of docs/least-privilege.md grants.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

DOC = "docs/least-privilege.md"
NEEDED = "user"  # SimpleAuthManager's role with every permission backfillctl uses (docs/least-privilege.md)
# SimpleAuthManager's roles above `user`, and what each adds that backfillctl never uses
EXCESS = {
    "op": "connections, pools, variables and assets",
    "admin": "connections, pools, variables, assets, the configuration and every other resource",
}


def token_claims(token: str) -> Mapping[str, Any] | None:
    """The payload of a JWT (read, not verified: it only says what the server issued), or None for a token that
    is no JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    return payload if isinstance(payload, dict) else None


def role_of(claims: Mapping[str, Any] | None) -> str | None:
    """SimpleAuthManager's role claim, lower case (all-admins mode issues `ADMIN`), or None when the token has none."""
    role = None if claims is None else claims.get("role")
    return role.lower() if isinstance(role, str) and role else None


def role_warning(who: str, role: str) -> str | None:
    """The warning for a SimpleAuthManager role above `user`, or None."""
    extra = EXCESS.get(role)
    if extra is None:
        return None
    return (
        f"least privilege: Airflow identity {who!r} has SimpleAuthManager's role {role!r} (its token says so); "
        f"backfillctl needs only {NEEDED!r} (read DAGs and runs; create, pause, unpause and cancel backfills), and "
        f"{role!r} also manages {extra}: give backfillctl its own login with the role {NEEDED!r} ({DOC})"
    )


def connections_warning(who: str) -> str:
    """The warning when the identity may read connections (`GET /api/v2/connections` -> 200)."""
    return (
        f"least privilege: Airflow identity {who!r} may read connections (GET /api/v2/connections -> 200), which "
        f"backfillctl never needs: its role grants more than reading DAGs and runs and editing backfills; give "
        f"backfillctl its own login with only those permissions ({DOC})"
    )
