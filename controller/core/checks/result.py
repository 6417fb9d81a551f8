"""What validating a tree found (pure): the specs, the policy, every located diagnostic, and the tree split per
spec (`ValidationResult.split`): a pass plans the valid specs and blocks each invalid file alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, InvalidSpec


@dataclass(frozen=True, slots=True)
class ValidationResult:
    specs: tuple[BackfillSpec, ...]
    policy: Policy
    diagnostics: tuple[Diagnostic, ...]
    files_checked: int
    loaded: tuple[LoadedSpec, ...] = field(default=(), repr=False)
    unloaded: tuple[FileIdentity, ...] = ()  # spec files whose YAML or schema failed: whose they seem to be
    policy_path: str | None = None  # where the policy's diagnostics are located (None: no policy file)
    policy_text: str | None = field(default=None, repr=False)  # the policy file's text (None: no policy file)
    skipped: tuple[str, ...] = ()  # checks this run could not make, each with why (an OK says what it did not check)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if not d.is_error)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def policy_errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.errors if self.policy_path is not None and d.location.source == self.policy_path)

    def split(self) -> SpecSet:
        """Per spec, not per tree: the specs without errors, and each file with errors on its own (a pass plans
        the first and blocks the second alone)."""
        failing: dict[str, list[str]] = {}
        for d in self.errors:
            if self.policy_path is None or d.location.source != self.policy_path:
                failing.setdefault(d.location.source, []).append(d.text())
        valid = tuple(s for s in self.specs if s.path not in failing)
        loaded = {s.path: s for s in self.specs}
        known = {f.path: f for f in self.unloaded}
        invalid = tuple(
            _invalid(path, tuple(texts), loaded.get(path), known.get(path)) for path, texts in sorted(failing.items())
        )
        text = None if self.policy_errors else self.policy_text
        return SpecSet(valid, invalid, self.policy, self.policy_errors, text)


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """What a spec file that did not load says of itself: its `name` and `dag_id` when they are strings."""

    path: str
    name: str
    dag_id: str


@dataclass(frozen=True, slots=True)
class SpecSet:
    """A tree's specs as a pass takes them: the valid ones, the invalid ones (each Blocked alone), the policy and
    the policy's own errors (an invalid policy holds every create and resume, never a reduction)."""

    valid: tuple[BackfillSpec, ...]
    invalid: tuple[InvalidSpec, ...]
    policy: Policy
    policy_errors: tuple[Diagnostic, ...] = ()
    policy_text: str | None = field(default=None, repr=False)  # the valid policy file's text (recorded per pass)


def _invalid(path: str, errors: tuple[str, ...], spec: BackfillSpec | None, known: FileIdentity | None) -> InvalidSpec:
    if spec is not None:
        return InvalidSpec(path, spec.name, spec.dag_id, errors, spec)
    if known is not None:
        return InvalidSpec(path, known.name, known.dag_id, errors)
    return InvalidSpec(path, _stem(path), "", errors)


def _stem(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name else name
