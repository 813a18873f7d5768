"""A graph's op plans spread over processes or a Dask cluster (issue 32, item 6;
docs/graphs.md 'At scale').

The op plans a graph asks for are independent: :func:`plan_many` makes them in this
process (few, or ``jobs: 1``), on a pool of forked processes sized to the machine (each
inherits the graph: a task is an op's index and its layout), or on a Dask cluster
(``--dask ADDRESS``; ``local`` starts one here), whose workers read the graph from its
file's text, once per worker.  Each plan is deterministic (its solver's seed, one worker
thread), so every backend gives the same plans, bit for bit (tests/test_scale.py).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

from tcplan.model.rules import TcplanError, fail

#: below this many plans the pool's start-up costs more than it saves
POOL_MIN_PLANS = 8
#: the graph a forked worker plans (set before the pool forks; read-only there)
_FORKED: dict[str, Any] = {}
#: graphs a Dask worker has read, by their text's hash
_READ: dict[int, Any] = {}


def plan_many(g, todo: list, opts, plan_op) -> list[tuple]:
    """Each ``(op, layout)`` of ``todo`` planned by ``plan_op`` (graph_plan.plan_op: a
    module-level function, sent to workers by name), in order."""
    if opts.dask:
        return _on_dask(g, todo, opts, plan_op)
    jobs = opts.jobs or (os.cpu_count() or 1)
    if jobs < 2 or len(todo) < POOL_MIN_PLANS or not hasattr(os, "fork"):
        return [plan_op(g, op, layout, opts) for op, layout in todo]
    return _on_pool(g, todo, opts, jobs, plan_op)


def checkers(opts) -> int:
    """How many checks a graph's run may run apart at once (executor/apart.py): the
    processes a pool would plan on (``--jobs``, else one per core), none below two, at
    most ``APART_MAX_CHECKS`` (without ``fork``, executor/apart.py runs none)."""
    from tcplan.model.limits import APART_MAX_CHECKS
    jobs = opts.jobs or (os.cpu_count() or 1)
    return min(jobs, APART_MAX_CHECKS) if jobs >= 2 else 0


def _bare(opts):
    """The options a worker plans with (no callback, no shared table)."""
    import dataclasses
    return dataclasses.replace(opts, progress=None, op_plans=None, dask=None, jobs=1)


def _forked_plan(item: tuple[int, dict[str, str]]) -> tuple:
    g, opts, plan_op = _FORKED["graph"], _FORKED["opts"], _FORKED["plan"]
    try:
        return ("ok", plan_op(g, g.ops[item[0]], item[1], opts))
    except TcplanError as e:
        return ("raise", e)


#: the weight of one layout's plan by kind, for the order the pool hands tasks out in:
#: a contraction's search (a few tenths of a second) about ten of a DMA's layouts, the
#: engines' and chains' plans (milliseconds) next to nothing (measured on a decode layer)
_WEIGHTS = {"contraction": 10.0, "dma": 1.0, "pcie": 1.0}


def _slow_first(todo: list) -> list[int]:
    """The order the pool hands ``todo`` out in: the heaviest task first (a kind's weight
    times the layouts the task plans: an op's rows under branch and bound are one task),
    so that no worker is left with a long one while the others idle (a stable sort)."""
    def weight(k: int) -> float:
        op, task = todo[k]
        return _WEIGHTS.get(op.kind, 0.01) * max(1, len(getattr(task, "layouts", ())))
    return sorted(range(len(todo)), key=lambda k: -weight(k))


def _on_pool(g, todo: list, opts, jobs: int, plan_op) -> list[tuple]:
    """The plans one at a time on a forked pool, the heaviest first (each plan is
    deterministic: the order they are made in changes none), back in ``todo``'s order."""
    import multiprocessing
    _FORKED.update(graph=g, opts=_bare(opts), plan=plan_op)
    order = _slow_first(todo)
    try:
        with multiprocessing.get_context("fork").Pool(min(jobs, len(todo))) as pool:
            got = pool.map(_forked_plan, [(todo[k][0].index, todo[k][1]) for k in order],
                           chunksize=1)
    finally:
        _FORKED.clear()
    out: list[tuple] = [()] * len(todo)
    for k, r in zip(order, got):
        out[k] = _unwrap(r)
    return out


def _unwrap(result: tuple) -> tuple:
    tag, value = result
    if tag == "raise":
        raise value
    return value


def dask_plan(text: str, path: str, items: list, opts, plan_op) -> list[tuple]:
    """On a Dask worker: the graph read from its file's text (once per worker), then
    each ``(op index, layout)`` planned."""
    from .spec import load_problem_text
    key = hash((text, path))
    if key not in _READ:
        _READ.clear()
        _READ[key] = load_problem_text(text, path).spec.graph
    g = _READ[key]
    out: list[tuple[str, Any]] = []
    for i, layout in items:
        try:
            out.append(("ok", plan_op(g, g.ops[i], layout, opts)))
        except TcplanError as e:
            out.append(("raise", e))
    return out


def _on_dask(g, todo: list, opts, plan_op) -> list[tuple]:
    """The plans as Dask tasks (one per chunk of ops), on the scheduler ``opts.dask``."""
    from .inputs import read_text
    text = read_text(g.doc.path)
    items = [(op.index, layout) for op, layout in todo]
    with dask_client(opts.dask) as client:
        n = max(1, len(client.scheduler_info().get("workers", {})) or 1)
        size = max(1, len(items) // (4 * n))
        chunks = [items[k:k + size] for k in range(0, len(items), size)]
        futures = client.map(dask_plan, [text] * len(chunks), [g.doc.path] * len(chunks),
                             chunks, [_bare(opts)] * len(chunks),
                             [plan_op] * len(chunks), pure=False)
        got = client.gather(futures)
    return [_unwrap(r) for part in got for r in part]


@contextlib.contextmanager
def dask_client(address: str, jobs: int = 2) -> Iterator[Any]:
    """A Dask client of the scheduler at ``address``, or of a local cluster of ``jobs``
    single-threaded worker processes started here (``local``), closed on exit."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise fail("bad-request", detail="--dask needs Dask (dask.distributed)",
                   fix="pip install 'tcplan[dask]'") from None
    cluster: Any = None
    try:
        if address == "local":
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(address, timeout="5s")
    except (OSError, TimeoutError, ValueError) as e:
        raise fail("bad-request", detail=f"--dask {address}: no Dask scheduler answers "
                   f"({type(e).__name__})", fix="start one (dask scheduler) or give "
                   "--dask local") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
