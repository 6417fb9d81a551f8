"""Independent Airflow reads at once: a bounded pool over keys, and two different reads side by side.

The transport bounds the calls in flight (`BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY`, and one dry run at a time),
whatever the callers' pools, so nesting these is safe; each only overlaps the waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

POOL = 8  # threads per fan-out, not calls: the client bounds those, so a pass of a few DAGs is queued at once
A = TypeVar("A")
B = TypeVar("B")
K = TypeVar("K")
V = TypeVar("V")


def concurrently(keys: Iterable[K], work: Callable[[K], V]) -> dict[K, V]:
    """`{key: work(key)}`, at most POOL at a time, in the keys' order."""
    ordered = list(keys)
    if len(ordered) <= 1:
        return {key: work(key) for key in ordered}
    with ThreadPoolExecutor(max_workers=min(POOL, len(ordered)), thread_name_prefix="observe") as pool:
        return dict(zip(ordered, pool.map(work, ordered), strict=True))


def alongside(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """`(first(), second())`, the second in a thread while the first runs here. Both always finish (the pool
    waits for the second); an exception is raised after both did, the first's before the second's, as if they
    had run in order."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="alongside") as pool:
        later = pool.submit(second)
        return first(), later.result()
