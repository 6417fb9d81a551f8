"""The rest summary and the revision it is keyed by (migration 0011), on SQLite and PostgreSQL: every write a summary
depends on bumps the revision in its own transaction, and no other write does; a summary reads back exactly; one
saved after a write since its revision was read is not kept; an unreadable one is no summary."""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from sqlalchemy import inspect, update

from controller.adapters.store import IndexedSpec, RestKey, RestSummary, Store
from controller.adapters.store.database import _alembic
from controller.adapters.store.spec_index import IndexedHead
from controller.adapters.store.tables import rest_summaries
from controller.core.model.binding import Binding, Claim, Phase
from controller.core.plan.rest import Resting


def row(n: int) -> IndexedSpec:
    return IndexedSpec(
        f"blob{n}", f"specs/s{n}.yaml", f"s{n}", "d", f"sha256:{n}", "Succeeded", {"name": f"s{n}"}, n, "", None
    )


def summary(revision: int) -> RestSummary:
    head = IndexedHead("blob9", "specs/owed.yaml", "owed", "d2", "sha256:9", publishes=True)
    live = IndexedHead("blob8", "specs/live.yaml", "live", "d2", "sha256:8", publishes=False)
    return RestSummary(
        RestKey("tree1", revision),
        Resting(((Phase.SUCCEEDED, 2), (Phase.CANCELLED, 1)), MappingProxyType({"d": ("a", "b"), "e": ("c",)})),
        ("gone",),
        ("live.yaml", "sub/linked"),
        MappingProxyType({"specs/owed.yaml": head}),
        MappingProxyType({"specs/owed.yaml": head, "specs/live.yaml": live}),
        MappingProxyType({"specs/owed.yaml": "blob9", "specs/live.yaml": "blob8"}),
        MappingProxyType({"a": Claim("a", "d", 7, (5, 6, 7), drained=True), "b": Claim("b", "d", None, (), False)}),
    )


def test_only_writes_a_summary_depends_on_bump_the_revision(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url)
    assert store.finished_revision() == 0
    store.save_binding(Binding("live", "d", 1, Phase.RUNNING, spec_digest="sha256:1"))
    store.save_binding(Binding("live", "d", 1, Phase.PAUSED, spec_digest="sha256:1"))
    assert store.finished_revision() == 0  # a live binding written each pass: no bump
    store.save_binding(Binding("live", "d", 1, Phase.SUCCEEDED, spec_digest="sha256:1"))
    assert store.finished_revision() == 1  # it finished
    store.save_binding(Binding("live", "d", 1, Phase.SUCCEEDED, spec_digest="sha256:1", reason="noted"))
    assert store.finished_revision() == 2  # a finished binding rewritten
    store.save_binding(Binding("live", "d", 2, Phase.PENDING, spec_digest="sha256:2"))
    assert store.finished_revision() == 3  # no longer finished
    store.save_binding(Binding("new", "d", 3, Phase.CANCELLED, spec_digest="sha256:3"))
    assert store.finished_revision() == 4  # new, and finished
    store.index_specs([], {"nothing"})
    assert store.finished_revision() == 4  # an index write that changes nothing
    store.index_specs([row(1), row(2)], {"blob1", "blob2"})
    assert store.finished_revision() == 5
    store.index_specs([], None)  # None: drop nothing
    assert store.finished_revision() == 5
    assert set(store.indexed_specs()) == {"blob1", "blob2"}
    store.index_specs([row(3)], None)
    assert store.finished_revision() == 6
    assert set(store.indexed_specs()) == {"blob1", "blob2", "blob3"}
    store.index_specs([], {"blob3"})  # rows dropped
    assert store.finished_revision() == 7
    assert set(store.indexed_specs()) == {"blob3"}
    assert sorted(store.unfinished_names()) == ["live"]


def test_a_summary_reads_back_exactly_and_one_saved_after_a_write_is_not_kept(
    make: Callable[..., Store], store_url: str
) -> None:
    store = make(store_url)
    assert store.rest_summary("specs") is None
    assert store.save_rest_summary("specs", summary(0)) is True
    assert store.rest_summary("specs") == summary(0)
    assert store.rest_summary("other") is None
    store.save_binding(Binding("x", "d", 1, Phase.SUCCEEDED, spec_digest="sha256:1"))
    assert store.save_rest_summary("specs", summary(0)) is False  # its reads began before that write
    assert store.rest_summary("specs") == summary(0)  # the old one stays, and its key no longer matches
    assert store.save_rest_summary("specs", summary(1)) is True
    assert store.rest_summary("specs") == summary(1)


def test_an_unreadable_summary_is_no_summary(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url)
    store.save_rest_summary("specs", summary(0))
    with store.engine.begin() as conn:
        conn.execute(update(rest_summaries).values(summary={"key": {"tree": "t"}}))
    assert store.rest_summary("specs") is None


def test_migration_0011_adds_the_tables_and_downgrades_cleanly(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url)
    assert store.revision() == "0011"
    store.save_binding(Binding("x", "d", 1, Phase.SUCCEEDED, spec_digest="sha256:1"))
    assert {"rest_summaries", "store_revisions"} <= set(inspect(store.engine).get_table_names())
    with store.engine.begin() as conn:
        _alembic(conn, "downgrade", "0010")
    assert store.revision() == "0010"
    assert not {"rest_summaries", "store_revisions"} & set(inspect(store.engine).get_table_names())
    with store.engine.begin() as conn:
        _alembic(conn, "upgrade", "head")
    assert store.revision() == "0011"
    assert store.finished_revision() == 0
    assert store.save_rest_summary("specs", summary(0)) is True
    assert store.rest_summary("specs") == summary(0)
