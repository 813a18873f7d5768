"""The problem kinds, one module each (ARCHITECTURE.md): importing this package registers
them in planner/registry.py, whose names it also gives (``from tcplan.planner.kinds import
REGISTRY, kind_of``)."""

from ..registry import (REGISTRY, UNMODELLED, Kind, Options, Solved, key_sets, kind_of,  # noqa: F401
                        kinds, refuse_unmodelled, register)
from . import basic, chains, contract, contraction, dma, engines, graph, moves, tu  # noqa: E402,F401 - each registers its kinds
