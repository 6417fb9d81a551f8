"""A loaded spec (pure): the spec with its document, for placing diagnostics; what every check takes."""

from __future__ import annotations

from collections.abc import Callable

from controller.core.documents.diagnostics import Location, PathPart
from controller.core.documents.yamlsafe import Document, load_document
from controller.core.model.spec import BackfillSpec, digest


class LoadedSpec:
    """A spec with its document, for placing diagnostics. A released one (`released`) keeps only the spec and
    a way to read its file again: the document is loaded again, once, when a later check asks for a position
    or a value (e.g. a duplicate name, the git or DAG checks); most valid specs never need it."""

    __slots__ = ("_doc", "_reread", "spec", "stem")

    def __init__(
        self, spec: BackfillSpec, doc: Document | None, stem: str, reread: Callable[[str], bytes | None] | None = None
    ) -> None:
        self.spec, self.stem, self._doc, self._reread = spec, stem, doc, reread

    @property
    def doc(self) -> Document:
        if self._doc is None:
            self._doc = _reload(self.spec, self._reread)
        return self._doc

    def released(self) -> LoadedSpec:
        """The same spec without its document when its file can be read again, else itself."""
        if self._reread is None:
            return self
        stem = self.spec.name if self.stem == self.spec.name else self.stem  # one string, not two equal ones
        return LoadedSpec(self.spec, None, stem, self._reread)

    def at(self, *path: PathPart) -> Location:
        return self.doc.locate(path)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LoadedSpec):
            return NotImplemented
        return (self.spec, self.doc, self.stem) == (other.spec, other.doc, other.stem)

    __hash__ = None  # type: ignore[assignment]  # like the dataclass it replaces (its document is mutable)

    def __repr__(self) -> str:
        return f"LoadedSpec(spec={self.spec!r}, stem={self.stem!r})"


def _reload(spec: BackfillSpec, reread: Callable[[str], bytes | None] | None) -> Document:
    """The document of a released spec, read again; a file changed or gone since places its diagnostics at its
    first line (its values are then unknown)."""
    raw = None if reread is None else reread(spec.path)
    doc = None if raw is None or digest(raw) != spec.digest else load_document(spec.path, raw)[0]
    return Document(spec.path, {}) if doc is None else doc
