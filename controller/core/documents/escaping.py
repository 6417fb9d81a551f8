"""One escaper per output medium for text from outside: spec files, Airflow, the store, a receiver's answer (pure).

- `plain`: a terminal or a CI log (stdout, stderr, text logs). Control characters (`\\t`, `\\r`, `\\n`, ESC and
  every other C0 or C1 control, DEL), Unicode line and paragraph separators and bidi controls become a space,
  so outside text never starts a line (a GitHub workflow command such as `::add-mask::`), moves the cursor,
  colours the terminal or makes a line read in another order.
- `json_text`: a JSON document that JSON itself leaves readable on a terminal (the same characters as `\\uXXXX`).
- `md_text`, `md_code`, `md_fence`: GitHub-flavoured Markdown. Text is one line with every character that could
  start markup, HTML, an entity, a link or a table cell backslash-escaped, so it cannot open a list item, a
  heading, a table row or HTML, and a code block's fence is longer than any run of backticks inside it.
- `slack_text`, `slack_pre`: Slack mrkdwn, which parses `<…>` as mentions and links and has no backslash
  escape: `&`, `<` and `>` become entities (Slack's own rule), a bare `@here`, `@channel` or `@everyone` gets a
  zero-width space after its `@` (no mention), and a code block cannot be closed from inside.

HTML is `html.escape` (the report and the status page).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# C0 and C1 controls, DEL, the Arabic letter mark, LRM/RLM, U+2028/U+2029 and the bidi embeddings, overrides
# and isolates (U+202A-U+202E, U+2066-U+2069)
_UNSAFE = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNSAFE_RUN = re.compile(f"[{_UNSAFE}]+")
_UNSAFE_CHAR = re.compile(f"[{_UNSAFE}]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#!|~&$])")
_MD_PLAIN = re.compile(r"^[A-Za-z0-9._:/+-]+$")
_BACKTICKS = re.compile(r"`+")
_SLACK_FENCE = "```"
_TICK_PAIR = re.compile(r"`(?=`)")  # Slack has no escape: a zero-width space between two backticks breaks a fence
_BROADCAST = re.compile(r"(?<!\w)@(?=(?:here|channel|everyone)\b)", re.IGNORECASE)  # Slack may notify a bare one


def plain(text: object) -> str:
    """One line for a terminal or a CI log: each run of unsafe characters becomes one space."""
    return _UNSAFE_RUN.sub(" ", str(text))


def plain_lines(lines: Sequence[str]) -> str:
    """Lines for a terminal, each made `plain`, each ending in a newline."""
    return "".join(plain(line) + "\n" for line in lines)


def json_text(document: str) -> str:
    """Serialised JSON with the unsafe characters JSON leaves raw (C1, DEL, separators, bidi) as `\\uXXXX`."""
    return _UNSAFE_CHAR.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


def md_text(text: object) -> str:
    """One line of Markdown text: whitespace runs (newlines too) become one space, and every character that
    could start markup, HTML, an entity, math or a table cell is backslash-escaped."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(plain(text).split()))


def md_code(text: object) -> str:
    """A code span for identifiers; anything that is not a plain identifier is escaped text instead (a `|` would
    end a table cell even inside a code span)."""
    value = str(text)
    return f"`{value}`" if _MD_PLAIN.match(value) else md_text(value)


def md_fence(lines: Sequence[str]) -> list[str]:
    """A fenced code block of `plain` lines, its fence longer than any run of backticks inside (CommonMark)."""
    body = [plain(line) for line in lines]
    longest = max((len(run) for line in body for run in _BACKTICKS.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *body, fence]


def slack_text(text: object) -> str:
    """One line of Slack mrkdwn: `plain`, `&`, `<` and `>` as entities (no mention, no link), no bare `@here`,
    `@channel` or `@everyone`, and no ``` fence."""
    flat = plain(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _TICK_PAIR.sub("`\u200b", _BROADCAST.sub("@\u200b", flat))


def slack_pre(text: object) -> str:
    """A Slack code block of several lines, each as `slack_text`: nothing inside can close it early."""
    body = "\n".join(slack_text(line) for line in str(text).split("\n"))
    return f"{_SLACK_FENCE}{body}{_SLACK_FENCE}"
