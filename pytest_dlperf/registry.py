"""One small registry: named things of one kind, in the order they were added.

Models and tasks (:mod:`pytest_dlperf.models.registry`), launchers (:mod:`pytest_dlperf.launch.launchers`),
log parsers (:mod:`pytest_dlperf.commands.parsers`), case kinds (:mod:`pytest_dlperf.controller.kinds`)
and measure functions (:mod:`pytest_dlperf.controller.throughput`) are each one :class:`Registry`: a name
given twice is refused in one place, an unknown name says which names there are, and a session that
registered things of its own puts the registry back as it was (:meth:`Registry.snapshot`).

Standard library only: the worker side imports it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Things of one kind (``what``: "launcher") by name.

    ``same(existing, new)``: whether a name given again is the same registration again (a model's file
    imported a second time), which then replaces the first; without it a name is taken once.
    ``taken(name, existing, new)``: the message when it is not.
    """

    def __init__(self, what: str, *, same: Callable[[T, T], bool] | None = None,
                 taken: Callable[[str, T, T], str] | None = None):
        self.what = what
        self._same = same
        self._taken = taken
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        """Register ``item`` as ``name``; ``ValueError`` when the name is empty or another registration's."""
        if not name:
            raise ValueError(f"a {self.what} needs a name")
        existing = self._items.get(name)
        if existing is not None and not (self._same is not None and self._same(existing, item)):
            raise ValueError(self._taken(name, existing, item) if self._taken is not None else
                             f"a {self.what} named {name!r} is registered already")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        """The item named ``name``; ``ValueError`` naming the registered ones where there is none."""
        try:
            return self._items[name]
        except KeyError:
            raise ValueError(f"unknown {self.what} {name!r}; expected one of {', '.join(self._items)}") from None

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def names(self) -> list[str]:
        """The names, in the order they were registered."""
        return list(self._items)

    def values(self) -> list[T]:
        return list(self._items.values())

    def snapshot(self) -> dict[str, T]:
        """A copy of what is registered now, for :meth:`restore`."""
        return dict(self._items)

    def restore(self, saved: Mapping[str, T]) -> None:
        """Put the registry back as :meth:`snapshot` saw it."""
        self._items.clear()
        self._items.update(saved)
