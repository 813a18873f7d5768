"""A cache of read-only arrays bounded by their bytes: the least recently used dropped
first.  The executor's stream layouts and the contraction model's TRF reads are pure
functions of mappings that a whole model asks for again and again (every layer alike)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class BytesLRU(Generic[V]):
    """``get(key, make)``: the value kept for ``key``, else ``make()`` kept; ``size(value)``
    its bytes; past ``most`` bytes the least recently used go (the newest always stays)."""

    def __init__(self, most: int, size: Callable[[V], int]):
        self.most, self.size = most, size
        self.items: "OrderedDict[Hashable, V]" = OrderedDict()
        self.bytes = 0

    def peek(self, key: Hashable) -> V | None:
        """The value kept for ``key`` (None: none), not counted as a use."""
        return self.items.get(key)

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        hit = self.items.get(key)
        if hit is not None:
            self.items.move_to_end(key)
            return hit
        value = make()
        self.items[key] = value
        self.bytes += self.size(value)
        while self.bytes > self.most and len(self.items) > 1:
            self.bytes -= self.size(self.items.popitem(last=False)[1])
        return value

    def clear(self) -> None:
        self.items.clear()
        self.bytes = 0


def read_only(*arrays: Any) -> None:
    """Mark numpy arrays read-only (a cached value is shared by every caller)."""
    for a in arrays:
        a.setflags(write=False)
