"""A loaded problem (docs/problem-format.md): what every problem has, and its kind's choices
as one typed, frozen value (``spec``), made by the kind's loader in planner/kinds/.

The layers below the kinds read a problem's choices only through its spec's fields: no
mapping of string keys travels between the loader and the planner (issue 28, item 2)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from tcplan.model.tiers import Tensor

S = TypeVar("S", covariant=True)


@dataclass(frozen=True)
class NoChoices:
    """The spec of a kind whose problem file holds nothing beyond its tensors."""


@dataclass
class Problem(Generic[S]):
    """One problem: its name and where it came from, its kind, chips, default dtype, axes,
    tensors by role, its kind's spec (``S``: the kind's choices, typed) and the ``expect``
    block `tcplan batch` checks."""

    path: str
    name: str
    kind: str
    chips: int
    dtype: str
    axes: dict[str, int]
    tensors: dict[str, Tensor]
    spec: S
    expect: dict[str, Any] = field(default_factory=dict)

    def with_tensors(self, **tensors: Tensor) -> "Problem[S]":
        """The same problem with the named tensors replaced (a hop, a candidate layout)."""
        return replace(self, tensors={**self.tensors, **tensors})
