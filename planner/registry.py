"""The kind registry (issue 17, item 0; issue 25, item 2; ARCHITECTURE.md).

Every kind of problem (``kind:`` in its file) implements one small protocol, :class:`Kind`,
in its own module of planner/kinds/, and is registered once in :data:`REGISTRY`.  The verbs
(the loader, lowering, verification, explanation, graphs) reach a kind only through this
module (:func:`kind_of`, :func:`kinds`): no ``kind ==`` chains elsewhere, and no verb
imports a kind's module.  The kinds sit above the verbs and import them; this module sits
below both.  It finds the kinds by name on first use (:func:`kinds` imports the package
planner.kinds, whose modules register themselves): a plugin's discovery, not an import of
the layer above.

=================  =========================================================================
method             what it does
=================  =========================================================================
``load``           its keys (``keys``) read from the problem file: tensors and its spec
``lower``          the problem -> what the hardware runs (a plan; planned when it is free)
``verify``         execute a lowered plan over simulated memories, check, time: a report
``inputs``         the tensors ``tcplan run`` takes
``run``            execute on the user's tensors: every tensor, as mathematical arrays
``render``         a lowered plan as text (``tcplan lower``)
``verify_lines``   what ``tcplan verify`` says of a report's breakdown
``solve``          plan the free choices, lower, verify, time: a :class:`Solved`
``solve_text``     what ``tcplan solve`` prints of it
``explain``        (exit code, report): the conflict, or what binds a feasible plan
``plan``           (plan, modelled cycles, proven optimal), free choices planned, nothing
                   run: a graph's op
``check_tensors``  the rules between an op and the graph's tensors it names (a chain's
                   Fetch and Commit of its DM tensors)
``execute``        run a graph's op on the graph's shared memories
``given_values``   seed data for a given tensor the op reads, when random bits will not do
``graph_context``  the context the op is scheduled on (main, sub, dma; planner/schedule.py),
                   with ``graph_resources``, ``graph_bank_accesses`` and ``graph_mac_use``;
                   ``graph_prelude``: a part it runs first on another context (a TRF fill)
``graph_summary``  what a graph's plan says of the op beside its cycles
``lower_bound``    the cycles no plan of the op's problem beats (a graph reports it per op)
``trace_warnings`` the placement rules a tensor breaks (``tcplan trace``)
=================  =========================================================================
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Protocol, TypeVar

from tcplan.model import hardware as hw
from tcplan.model import tiers
from tcplan.model.rules import TcplanError, fail

from .render import EXIT_OK, EXIT_RULE, format_error

R = TypeVar("R")


@dataclass(frozen=True)
class Options:
    """How to solve: the solver's time limit (seconds), worker threads and seed (also the
    seed of the verification data), the check (``full``, ``sample`` or ``none``), and the
    progress callback of planner/progress.py (None: silent)."""

    time_limit: float = 10.0
    workers: int = 1
    seed: int = 0
    verify: str = "full"
    progress: Callable[[str, int, "int | None", str], None] | None = None
    #: op plans shared by the graphs of one run (planner/op_cache.py ``OpPlans``): the
    #: same op over the same tensors is planned once
    op_plans: Any = None
    #: processes planning a graph's ops (planner/op_pool.py): 0 the machine's cores
    jobs: int = 0
    #: a Dask scheduler's address planning a graph's ops ("local": a local cluster)
    dask: str | None = None
    #: a rejected layout proven by the rules alone where they can (a graph's op plans:
    #: planner/layout.py ``SearchRequest.rules_first``)
    rules_first: bool = False
    #: plan a graph as before issue 32 (every op plan made, one joint model, one schedule):
    #: the benchmarks' baseline (``solve --flat``)
    flat: bool = False


@dataclass(frozen=True)
class Staged(Generic[R]):
    """A search in two steps (issue 32, item 2): ``floor()``, what every plan it can find
    takes at least, known before it searches (None: no floor), and ``run()``, the search
    (which does not repeat what ``floor()`` did)."""

    floor: Callable[[], int | None]
    run: Callable[[], R]


class SolveRecord(Protocol):
    """What a kind's ``solve`` records (each kind's own frozen dataclass): the fields every
    caller reads, and ``to_json()``, what ``--json`` prints.  The text renderers read the
    record's fields (issue 28, item 4)."""

    @property
    def status(self) -> str: ...

    @property
    def cycles(self) -> int | None: ...

    @property
    def verified(self) -> bool | None: ...

    @property
    def lower_bound(self) -> int | None: ...

    @property
    def breakdown(self) -> dict[str, Any] | None:
        """The plan's cycle report (model/cost.py's JSON), when the kind times one."""

    @property
    def error(self) -> TcplanError | None:
        """Why a plan found did not verify (None: it did, or was not run)."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class NoPlanRecord:
    """A solve without a plan: ``infeasible`` (the conflict) or ``unknown`` (the time limit
    stopped the search first); ``explanation`` is the error's JSON."""

    problem: str
    status: str
    explanation: dict[str, Any]
    cycles: None = None
    verified: None = None
    lower_bound: None = None
    breakdown: None = None
    error: None = None

    @staticmethod
    def of(problem: str, err: TcplanError, status: str | None = None) -> "NoPlanRecord":
        """``status`` by default: ``unknown`` at the time limit, else ``infeasible``."""
        return NoPlanRecord(problem, status or ("unknown" if err.code == "plan-time-limit"
                                                else "infeasible"), err.to_json())

    def to_json(self) -> dict[str, Any]:
        return {"problem": self.problem, "status": self.status, "cycles": None,
                "plan": None, "verified": None, "explanation": self.explanation}


@dataclass
class Solved:
    """A solve's record (its kind's :class:`SolveRecord`), the plan it lowered (None when
    there is none), the error that says why there is none, and the exit code."""

    record: SolveRecord
    plan: Any = None
    error: TcplanError | None = None
    exit: int = EXIT_OK

    @staticmethod
    def no_plan(problem: str, err: TcplanError, status: str | None = None) -> "Solved":
        """No plan: the record says why (``status`` as :meth:`NoPlanRecord.of`), the exit
        code is a rule's."""
        return Solved(NoPlanRecord.of(problem, err, status), error=err, exit=EXIT_RULE)


class Kind:
    """The protocol; a method a kind does not have says so (``bad-request``)."""

    names: tuple[str, ...] = ()  # the ``kind:`` values it serves
    #: per name, the top-level keys it adds to every problem's and which it requires
    keys: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    output_word = "destination"  # what verification checks, in messages
    solvable = False  # `tcplan solve` plans it (`batch` solves it rather than verifies)
    #: as a graph's op, per name: role -> (it reads the tensor, the tensor's spec goes into
    #: the op's own problem under the role's key); a name not here is not a graph op
    graph_roles: dict[str, dict[str, tuple[bool, bool]]] = {}
    #: as a graph's op: its tensors carry the same axes (a move or an elementwise chain;
    #: a gather's table, index and rows do not)
    graph_same_axes = True
    #: as a graph's op: the tensor it writes may carry axes the ones it reads do not (a
    #: move's broadcast, model/broadcast.py); the read ones still carry the same axes
    graph_broadcast = False
    engine_stream = False  # its stream's Chip, Cluster and Slice select engines (a DMA)
    #: as a graph's op: the role whose tensor's dtype is the op problem's dtype (an engine
    #: op reads a stream of its own type); None: the op's ``dtype:``, else the graph's
    dtype_role: str | None = None
    #: what `--plot` / `--report` draw of its plan (planner/plot.py): "transfer" (a DMA's
    #: breakdown: both), "tensor unit" (a Fetch's or Commit's: `--plot`), "" (nothing)
    pictures = ""
    scheduled = False  # its plan has a schedule of contexts (`--trace`; planner/schedule.py)
    #: as a graph's op: :meth:`execute` reads only the values (not the memories) and
    #: :meth:`replay` makes what it makes, so a graph's run may replay the op and check it
    #: in a process of its own meanwhile (executor/apart.py; a contraction's own graph)
    checks_apart = False

    def has_schedule(self, problem) -> bool:
        """This problem's plan has a schedule of contexts (the kind's ``scheduled``)."""
        return self.scheduled

    # -- as a graph's op in the schedule (planner/schedule.py) --------------------------------
    def graph_context(self, data: dict) -> str | None:
        """The context the op runs on (main, sub or dma), from its keys as written; None:
        the context of the Tensor Unit path its streams join (main for an op alone)."""
        return None

    def graph_resources(self, name: str) -> frozenset[str]:
        """What the op of kind ``name`` holds besides its context: the Vector Engine for
        the ops it serves (hardware.VECTOR_ENGINE_OPS)."""
        return frozenset({"vector engine"}) if name in hw.VECTOR_ENGINE_OPS else frozenset()

    #: the op's prelude: a part it runs first on another context, reading one of its
    #: tensors (a contraction op's TRF fill: the ``trf`` role, the sub context), as (the
    #: role, the context, a label); None: the op is one task (planner/schedule.py)
    graph_prelude: tuple[str, str, str] | None = None

    def graph_prelude_cycles(self, plan) -> int:
        """The cycles of the op's prelude under ``plan`` (its other part takes the op's
        cycles less these)."""
        return 0

    def graph_bank_accesses(self, plan) -> int:
        """The op's consecutive accesses to one DM bank: its share of the limit of 64 across
        contexts running at once (0: none)."""
        return 0

    def graph_mac_use(self, plan) -> float:
        """The multiplier-cycles the op keeps busy (its cycles times its MAC utilization; 0
        for an op without a contraction)."""
        return 0.0

    def load(self, ctx, data: dict, kind: str, tensors: dict) -> Any:
        """Read the kind's keys of ``data`` (checked against ``keys``): its tensors into
        ``tensors``; returns its spec, the one frozen value of its choices
        (``Problem.spec``); ``ctx`` (planner/spec.py) reads tensors and choices with located
        errors."""
        raise NotImplementedError

    def lower(self, problem) -> Any:
        raise NotImplementedError

    def verify(self, problem, plan, seed: int, progress=None) -> dict[str, Any]:
        raise NotImplementedError

    def inputs(self, problem) -> tuple[str, ...]:
        return ()

    def run(self, problem, plan, inputs: dict, seed: int) -> dict:
        raise fail("bad-request", detail=f"tcplan run executes data moves; a {problem.kind} "
                   "problem has none", fix="use tcplan verify or trace")

    def render(self, problem, plan) -> str:
        return plan.text()

    def verify_lines(self, report: dict[str, Any]) -> list[str]:
        return []

    def solve(self, problem, opts: Options) -> Solved:
        raise fail("bad-request", detail=f"tcplan solve plans expression and DMA problems; "
                   f"{problem.path} is a {problem.kind} problem",
                   fix="use tcplan verify for a problem with nothing to choose")

    def solve_text(self, problem, solved: Solved) -> str:
        """A solve without a plan; a kind that solves renders its plans itself."""
        head = f"{problem.name}: {solved.record.status}"
        return head if solved.error is None else head + "\n" + format_error(solved.error)

    def explain(self, problem, seed: int = 0) -> tuple[int, dict[str, Any]]:
        raise fail("bad-request", detail=f"tcplan explain covers DMA and expression problems, "
                   f"not {problem.kind}", fix="use tcplan verify")

    def plan(self, problem, opts: Options) -> tuple[Any, int | None, bool]:
        raise fail("bad-request", detail=f"a {problem.kind} problem is not a graph op",
                   fix="graph ops are the kinds docs/graphs.md lists under ops")

    #: its :meth:`staged` plans give floors: a graph plans the op's layouts by branch and
    #: bound (planner/graph_bound.py)
    graph_floors = False

    def staged(self, problem, opts: Options) -> Staged[tuple[Any, int | None, bool]]:
        """The op's plan in two steps (planner/graph_bound.py): a floor of its cycles under
        its layout, cheap, without its search (None: none), then :meth:`plan`.  A kind that
        gives a floor runs one task with no prelude and the same bank accesses under every
        plan: its cycles are then all the joint choice reads of its plans."""
        return Staged(lambda: None, lambda: self.plan(problem, opts))

    def check_tensors(self, problem, plan, tensors: dict) -> None:
        """Nothing to check beyond the op's own problem (its tensors are in it)."""

    def execute(self, problem, plan, mem, tensors: dict, values: dict, seed: int) -> dict:
        """Run the op on the graph's memories ``mem``: ``tensors`` role -> Tensor in its
        layout, ``values`` role -> the mathematical tensor each role it reads holds; returns
        role -> the mathematical tensor each role it writes must hold, checked."""
        raise NotImplementedError

    def replay(self, problem, plan, mem, tensors: dict, values: dict, seed: int
               ) -> dict | None:
        """:meth:`execute` for an op whose twin (the same plan at the same addresses)
        already ran and was checked in this graph's run: the values the op's engines make
        of ``values`` (a move's: what its destination must hold; arithmetic's: the
        engines' own sums), written where the op's plan puts them, without running its
        commands or checking them again.  None: the kind runs :meth:`execute` instead."""
        return None

    def graph_extra_roles(self, op: dict[str, Any]) -> dict[str, tuple[Any, tuple]]:
        """As a graph's op: the roles the op names of its own beside ``graph_roles`` (a
        stream chain's VRF operands), role -> (the tensor's name as written, where: its
        keys in the op); each reads its tensor and puts its spec into the op's problem."""
        return {}

    #: the roles whose HBM tensor an op's plan may be moved with (:meth:`graph_rebase`):
    #: its plan is shared by ops at addresses a multiple of ``HBM_DECODE_PERIOD`` apart
    graph_rebases: tuple[str, ...] = ()

    def graph_rebase(self, plan, shifts: dict[str, int], problem: Callable[[], Any]) -> Any:
        """The plan with the tensors of ``graph_rebases`` roles moved ``shifts[role]``
        bytes (only kinds that name such roles are asked); ``problem()`` makes the op's
        problem at its own addresses."""
        raise NotImplementedError

    def graph_place(self, data: dict[str, Any], role: str, spec: dict[str, Any]) -> tuple:
        """Put a role's tensor spec into the op's problem ``data``; returns its keys there
        (for located errors)."""
        data[role] = spec
        return (role,)

    def graph_summary(self, plan) -> dict[str, Any]:
        """What a graph's plan says of this op beside its cycles (a DMA: its stream)."""
        return {}

    def lower_bound(self, problem, plan) -> int | None:
        """Cycles no plan of the op's problem beats (None: no bound modelled)."""
        return None

    def given_values(self, problem, plan, role: str, seed: int) -> Any:
        """The data a given tensor the op reads under ``role`` is seeded with, when random
        bits will not do (an index tensor: valid rows); None: random bits."""
        return None

    def trace_check(self, problem) -> None:
        """Whether `tcplan trace` can follow an index through the problem's tensors."""

    def traced_tensors(self, problem) -> dict[str, Any]:
        """The tensors `tcplan trace` follows an index through: the problem's as written,
        or, where it leaves a layout free, as its plan lays them out (what `lower` and
        `verify` use)."""
        return dict(problem.tensors)

    def trace_warnings(self, problem, name: str, t) -> list:
        return tiers.placement_violations(t, problem.chips)


def key_sets(extra: set[str], required: set[str]) -> tuple[frozenset[str], frozenset[str]]:
    """A kind's top-level keys and the ones of them it requires."""
    return frozenset(extra), frozenset(required)


#: what real kernels do that tcplan does not express yet, with the reason (docs/kernels.md):
#: a problem or a graph op of one of these kinds is refused at its line, saying so
UNMODELLED: dict[str, str] = {}


def refuse_unmodelled(doc, keys: tuple, kind: str) -> None:
    """A located error for a kind tcplan does not express (``UNMODELLED``), else nothing."""
    why = UNMODELLED.get(kind)
    if why is not None:
        raise doc.error(keys, f"{kind!r} is not modelled: {why} (docs/kernels.md)",
                        "write the data movement around it: dma, fetch and commit ops, the "
                        "computed stream a given tensor (docs/graphs.md)")


REGISTRY: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    if set(kind.keys) != set(kind.names):  # pragma: no cover - guards the registry itself
        raise ValueError(f"kind {kind.names} declares keys for {sorted(kind.keys)}")
    for n in kind.names:
        if n in REGISTRY:  # pragma: no cover - guards the registry itself
            raise ValueError(f"kind {n} registered twice")
        REGISTRY[n] = kind
    return kind


def kinds() -> dict[str, Kind]:
    """Every registered kind by name, the kinds' package loaded on first use."""
    if not REGISTRY:
        importlib.import_module("tcplan.planner.kinds")
    return REGISTRY


def kind_of(problem) -> Kind:
    """The kind of a loaded problem."""
    return kinds()[problem.kind]
