"""The cyclic garbage collector around a command and its reconcile passes.

Both make long-lived objects that a collection can only traverse again, never free: start-up imports ~800
modules (measured: ~80 ms of collections during a `reconcile --once` start), and a pass holds O(history)
bindings, index rows, specs and items (0.5 s of a 2.9 s pass over 10,000 finished specs). So the collector is
off through start-up and each pass, and collects between passes. The console script's process ends with its
command: turning the collector on at the end would only collect what the exit frees anyway (measured: a
collection of 53 ms after a 5-spec pass), and the objects are frozen, which the exit's own collection skips
(measured over 10,000 finished specs: ~0.3 s less from the command's end to the process's).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_found_on: bool | None = None  # the collector's state when the running command started (None: no command)


@contextmanager
def command(*, process_ends: bool = False) -> Iterator[None]:
    """A command's whole run with the collector off; as it was found afterwards, unless `process_ends`."""
    global _found_on  # noqa: PLW0603 - one process-wide fact, as the collector itself is
    _found_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        on, _found_on = _found_on, None
        if process_ends:
            gc.freeze()  # the interpreter's exit collection runs even with the collector off: it skips these
        elif on:
            gc.enable()


class Passes:
    """A run of passes: the collector off during each, collecting between them when the command found it on."""

    def __init__(self) -> None:
        self.in_command = _found_on is not None  # then the command gives the collector back, when it ends
        self.on = gc.isenabled() if _found_on is None else _found_on

    def __enter__(self) -> Passes:
        gc.disable()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.on and not self.in_command:
            gc.enable()

    @contextmanager
    def between(self) -> Iterator[None]:
        """The wait between two passes: the last pass's young garbage collected, the collector on meanwhile."""
        if not self.on:
            yield
            return
        gc.enable()
        gc.collect(1)  # the pass allocated with the collector off: nothing else would trigger a collection
        try:
            yield
        finally:
            gc.disable()
