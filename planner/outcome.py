"""What a search returns (issue 28, item 3): one of

* :class:`Found`: plans, the best first, and whether the best is proven optimal under the
  cycle model (False: the time limit cut the search after a plan);
* :class:`NoPlan`: no plan exists; ``error`` names the rules in conflict (a minimal set);
* :class:`TimedOut`: the time limit stopped the search before any plan (``plan-time-limit``);
* :class:`Dominated`: nothing in the search beats the plan the caller already has (a search
  told to ``beat`` one).

Each carries the search's own record (``record``: what it tried, counted and kept, typed by
the search), so a caller reads why as a value, never from an exception.  ``Found.unwrap``
and :func:`unwrap` give the record of a found plan or raise the error of a missing one, for
callers that only go on with a plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar, Union

from tcplan.model.rules import TcplanError, fail

R = TypeVar("R")


@dataclass(frozen=True)
class Found(Generic[R]):
    record: R
    proven: bool = True

    @property
    def status(self) -> str:
        """``optimal`` (proven under the cycle model) or ``feasible``."""
        return "optimal" if self.proven else "feasible"


@dataclass(frozen=True)
class NoPlan(Generic[R]):
    error: TcplanError
    record: R


@dataclass(frozen=True)
class TimedOut(Generic[R]):
    error: TcplanError
    record: R


@dataclass(frozen=True)
class Dominated(Generic[R]):
    record: R


Outcome: TypeAlias = Union[Found[R], NoPlan[R], TimedOut[R], Dominated[R]]


def unwrap(outcome: "Found[R] | NoPlan[Any] | TimedOut[Any] | Dominated[Any]") -> R:
    """The record of a found plan; the error of a missing one, raised (a search may keep
    another record when it finds nothing: a graph's conflict)."""
    if isinstance(outcome, Found):
        return outcome.record
    raise error_of(outcome)


def error_of(outcome: "NoPlan[Any] | TimedOut[Any] | Dominated[Any]") -> TcplanError:
    """Why there is no plan: the outcome's error (a dominated search: it beat nothing)."""
    if isinstance(outcome, Dominated):
        return fail("plan-no-layout", (), pieces="of the search",
                    rules="nothing here beats the plan the caller has")
    return outcome.error

