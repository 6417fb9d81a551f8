"""What a pass reads of every binding and every index row before it knows which specs rest (`binding_heads`,
`index_heads`), and the whole of only those it plans (`bindings(named=…)`, `indexed_specs(blobs)`), on SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from controller.adapters.store import IndexedHead, IndexedSpec, Store
from controller.adapters.store import bindings as binding_rows
from controller.core.model.binding import Applied, Binding, BindingHead, Claim, Phase
from controller.core.model.chunks import Chunk, Progress

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def saved(store: Store) -> dict[str, Binding]:
    chunked = Progress(10, (Chunk(9, T0, T0, 1, 1),))
    kept = [
        Binding("running", "d1", 1, Phase.RUNNING, spec_digest="sha256:1"),
        Binding("dry", "d1", None, Phase.SUCCEEDED, spec_digest="sha256:2"),  # a dry run of nothing to do
        Binding("chunked", "d2", None, Phase.CANCELLED, spec_digest="sha256:3", progress=chunked),
        Binding("refused", "d2", None, Phase.BLOCKED, spec_digest="sha256:4", reason="refused"),
        Binding("done", "d3", 5, Phase.COMPLETED_WITH_FAILURES, spec_digest="sha256:5"),
        Binding("drained", "d3", 8, Phase.SUCCEEDED, backfills=(6, 7, 8), applied=Applied({"drain_dag": True}, "c1")),
        Binding("kept", "d3", 11, Phase.SUCCEEDED, backfills=(11,), applied=Applied({"drain_dag": False}, "c1")),
    ]
    for binding in kept:
        store.save_binding(binding)
    return store.bindings()


def test_a_bindings_head_says_what_the_whole_binding_says_and_named_bindings_are_read_in_batches(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(store_url)
    every = saved(store)
    heads = store.binding_heads()
    assert heads == {name: binding.head() for name, binding in every.items()}
    assert {name: head.applied for name, head in heads.items()} == {
        "running": True,
        "dry": True,
        "chunked": True,
        "refused": False,
        "done": True,
        "drained": True,
        "kept": True,
    }
    assert heads["chunked"] == BindingHead("chunked", "d2", Phase.CANCELLED, "sha256:3", applied=True)
    monkeypatch.setattr(binding_rows, "_BATCH", 2)
    named = store.bindings(named=["done", "refused", "chunked", "gone"])
    assert named == {name: every[name] for name in ("chunked", "done", "refused")}
    assert store.bindings(named=[]) == {}


def test_a_claim_says_what_the_whole_binding_claims(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(store_url)
    every = saved(store)
    monkeypatch.setattr(binding_rows, "_BATCH", 2)
    claims = store.claims(["drained", "kept", "chunked", "done", "refused", "gone"])
    assert claims == {name: every[name].claim() for name in ("chunked", "done", "drained", "kept", "refused")}
    assert claims["drained"] == Claim("drained", "d3", 8, (6, 7, 8), drained=True)
    assert claims["kept"] == Claim("kept", "d3", 11, (11,), drained=False)
    assert claims["chunked"] == Claim("chunked", "d2", None, (9,))
    assert claims["done"] == Claim("done", "d3", 5, (5,))
    assert claims["refused"] == Claim("refused", "d2", None, ())
    assert store.claims([]) == {}
    with store.engine.begin() as conn:  # rows an older release wrote: no detail, a detail without `backfills`
        conn.execute(text("UPDATE bindings SET detail = NULL WHERE spec_name = 'done'"))
        conn.execute(text("UPDATE bindings SET detail = '{\"reason\": \"r\"}' WHERE spec_name = 'kept'"))
    older = store.claims(["done", "kept"])
    assert older == {name: binding.claim() for name, binding in store.bindings(named=["done", "kept"]).items()}
    assert older == {"done": Claim("done", "d3", 5, (5,)), "kept": Claim("kept", "d3", 11, (11,))}


def row(n: int, data: dict[str, object]) -> IndexedSpec:
    return IndexedSpec(f"blob{n}", f"specs/s{n}.yaml", f"s{n}", "d", f"sha256:{n}", "Succeeded", data, n, "", None)


def test_an_index_head_says_whether_the_document_has_a_publish_run_and_skips_rows_of_another_version(
    make: Callable[..., Store], store_url: str
) -> None:
    store = make(store_url)
    rows = [
        row(0, {"name": "s0"}),
        row(1, {"name": "s1", "publish": {"dag_id": "publish_dag"}}),
        row(2, {"name": "s2", "publish": None}),
        row(3, {"name": "s3"}),
    ]
    store.index_specs(rows, {r.blob_id for r in rows})
    with store.engine.begin() as conn:  # a row another release wrote: neither its head nor its whole is read
        conn.execute(text("UPDATE spec_index SET facts = '{\"version\": 99}' WHERE blob_id = 'blob3'"))
    heads = store.index_heads()
    assert heads == {
        f"blob{n}": IndexedHead(f"blob{n}", f"specs/s{n}.yaml", f"s{n}", "d", f"sha256:{n}", publishes)
        for n, publishes in ((0, False), (1, True), (2, False))  # `publish: null` is none, as the spec reads it
    }
    assert store.indexed_specs({"blob1", "blob3", "blob7"}) == {"blob1": rows[1]}
    assert store.indexed_specs() == {r.blob_id: r for r in rows[:3]}
