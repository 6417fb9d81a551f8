"""The dead-man's ping: after each good pass, a GET of the URL an external monitor gave (healthchecks.io,
Cronitor, a Prometheus pushgateway endpoint…), so that it alerts when the pings stop. The URL is a secret (its path
is the monitor's key): no error names it, and nothing of the answer is read."""

from __future__ import annotations

import httpx

PING_TIMEOUT_S = 5.0


def ping(url: str, *, timeout: float = PING_TIMEOUT_S, transport: httpx.BaseTransport | None = None) -> str | None:
    """None when the monitor answered 2xx; else what went wrong, without the URL."""
    try:
        with (
            httpx.Client(timeout=timeout, follow_redirects=False, transport=transport) as client,
            client.stream("GET", url, headers={"User-Agent": "backfillctl"}) as response,
        ):
            status = response.status_code
    except httpx.HTTPError as exc:
        return f"the ping failed: {type(exc).__name__}"
    except ValueError:  # httpx refuses a URL it cannot parse
        return "the ping URL is not a valid http(s) URL"
    return None if 200 <= status < 300 else f"the ping answered HTTP {status}"
