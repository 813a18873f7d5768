"""What a kernel's expressions evaluate to while the importer reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .syntax import Node
from .types import TensorType


class Unsupported(Exception):
    """A statement tcplan cannot express: the importer leaves it out and says why."""

    def __init__(self, node: Node, reason: str):
        super().__init__(reason)
        self.node = node
        self.reason = reason


@dataclass
class Slot:
    """A tensor variable: its type and the graph tensor that holds its value now (None: an
    argument or a ``DmTensor::new()`` not read yet, made a given tensor when first read)."""

    type: TensorType
    base: str
    tensor: str | None = None


@dataclass(frozen=True)
class Tile:
    """``x.tile::<A, n, M>(i)``: the view of tile ``i`` of ``x`` (Element ``M``)."""

    slot: Slot
    element: str
    index: int


@dataclass(frozen=True)
class Context:
    """``ctx.main``, ``ctx.sub`` or ``ctx.tdma``."""

    name: str


@dataclass(frozen=True)
class Const:
    """A number (a literal or a ``const``)."""

    value: float


@dataclass(frozen=True)
class Enum:
    """An enum value (``TagMode::Zero``; ``FpBinaryOp::MulF(FpMulAlu::Mul0)`` as
    ``MulF(Mul0)``) or a unit name (``Stash``)."""

    name: str


@dataclass(frozen=True)
class Struct:
    """``SwitchConfig::Broadcast1 { slice1: 8, slice0: 4 }``: its variant and fields."""

    variant: str
    fields: dict[str, Any]


@dataclass
class Flow:
    """A Tensor Unit pipeline being read: its context, the stream it has reached (None right
    after ``begin``) and, between ``vector_init`` and ``vector_final``, the chain's steps;
    between ``contract_outer`` and ``contract_lane``, the contraction's stages."""

    context: str
    source: str
    base: str
    stream: str | None = None
    steps: list[Any] | None = None
    chain_source: str | None = None
    vrf: dict[str, str] = field(default_factory=dict)
    chain_type: TensorType | None = None
    stages: dict[str, Any] | None = None
