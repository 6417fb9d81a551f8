"""Posting one notification to a webhook (httpx); httpx's exceptions become `WebhookError`.

The URL is a secret (Slack's incoming-webhook URLs carry their token): it is never logged, never put into an
error message, and never stored; errors name the receiver and the environment variable instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from controller.core.audit.notify import IDEMPOTENCY_HEADER
from controller.core.documents.escaping import plain
from controller.errors import ControllerError, truncate


class WebhookError(ControllerError):
    """A delivery failed; `retry` says whether trying later can help (always tried again, with backoff)."""


class WebhookClient:
    def __init__(self, *, timeout: float = 5.0, transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 3.0)), transport=transport, follow_redirects=False
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> WebhookClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def post(self, url: str, body: Mapping[str, Any], key: str, *, receiver: str) -> int:
        """POST the JSON body with the idempotency key header; a 2xx answer is a delivery."""
        try:
            response = self._http.post(
                url, json=dict(body), headers={IDEMPOTENCY_HEADER: key, "User-Agent": "backfillctl"}
            )
        except httpx.HTTPError as exc:
            # never str(exc): httpx puts the URL (the secret) into some messages
            raise WebhookError(f"receiver {receiver}: {type(exc).__name__} (no answer)") from None
        except (ValueError, httpx.InvalidURL):  # an invalid URL in the environment variable
            raise WebhookError(f"receiver {receiver}: the webhook URL is not a valid http(s) address") from None
        if not 200 <= response.status_code < 300:
            detail = truncate(plain(_scrub(response.text, url)), 120)
            raise WebhookError(f"receiver {receiver}: HTTP {response.status_code} {detail}".rstrip())
        return response.status_code


def _scrub(text: str, url: str) -> str:
    """A receiver may echo the request URL back; never pass it on."""
    return text.replace(url, "[webhook url]").replace(url.split("?", maxsplit=1)[0], "[webhook url]").strip()
