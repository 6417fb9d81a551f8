"""What a pass reads in parts, so that finished specs cost it little (a part of `Store`)."""

from __future__ import annotations

from collections.abc import Collection

from controller.adapters.store.bindings import Bindings
from controller.adapters.store.rest_summary import RestSummaries, RestSummary
from controller.adapters.store.spec_index import IndexedHead, IndexedSpec, SpecIndex
from controller.core.model.binding import BindingHead, Claim


class PartReads:
    """Every binding's and index row's head first, then whole rows only for the specs a pass plans, and of finished
    specs at rest on a walked DAG, their claims; or, when the rest summary of the folder is the pass's own, only the
    live specs' rows (`rest_summary`)."""

    _bindings: Bindings
    _index: SpecIndex
    _summaries: RestSummaries

    def binding_heads(self) -> dict[str, BindingHead]:
        return self._bindings.heads()

    def unfinished_names(self) -> list[str]:
        return self._bindings.unfinished()  # the bindings not in a terminal phase

    def claims(self, named: Collection[str]) -> dict[str, Claim]:
        return self._bindings.claims(named)

    def indexed_specs(self, blobs: Collection[str] | None = None) -> dict[str, IndexedSpec]:
        return self._index.all(blobs)  # by blob id: every row, or those of `blobs`

    def index_heads(self) -> dict[str, IndexedHead]:
        return self._index.heads()

    def finished_revision(self) -> int | None:
        return self._summaries.revision()  # bumped by every write a rest summary depends on

    def rest_summary(self, folder: str) -> RestSummary | None:
        return self._summaries.get(folder)

    def save_rest_summary(self, folder: str, summary: RestSummary) -> bool:
        return self._summaries.save(folder, summary)  # False: a write since its revision was read, not kept
