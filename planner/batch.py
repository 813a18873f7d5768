"""`tcplan batch`: every problem under a directory, on this machine or a cluster
(docs/batch.md; docs/decisions.md item 89).

A problem is one task: its file's text goes to a worker, which solves (or verifies) it and
checks its ``expect`` block, and a row comes back.  Whatever happens, a row: a problem that
crashes tcplan is a failed row; a worker process lost mid-run (killed, out of memory) has
its problem retried once, alone, and then reported.  Rows stream to a JSON Lines file as
they finish (``--results``); ``--resume`` skips the problems already in it.

Backends (:data:`BACKENDS`), each behind :class:`Backend`: ``local`` (a process pool on
this machine, the default; no extra install) and ``dask`` (a Dask cluster: ``--address``
connects to a running scheduler, without it a local cluster is started; ``pip install
'tcplan[dask]'``).  Every backend gives the same rows for the same seed: the table is
sorted by path, whatever order the problems finish in.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from tcplan.model.rules import TcplanError, fail

from .inputs import os_reason

LOG = logging.getLogger("tcplan")
#: the fields of a row that are seconds: they differ from run to run, nothing else does
TIME_FIELDS = ("time", "times", "solve_time")
#: fault injection for the tests of worker loss: a directory; a problem whose text holds
#: ``# tcplan-test: kill-worker`` ends its worker process (``-once``: on its first attempt)
CRASH_ENV = "TCPLAN_TEST_KILL_DIR"


@dataclass(frozen=True)
class Task:
    path: str  # as listed under the directory (the row's key)
    text: str  # the problem file's text (workers need no shared file system)


def tasks_under(directory: str) -> list[Task]:
    """Every *.yaml under a directory, sorted, read here (bounded)."""
    from .inputs import read_text
    root = pathlib.Path(directory)
    try:
        if not root.is_dir():
            raise fail("bad-request", detail=f"{directory} is not a directory",
                       fix="give a directory of problem files")
        paths = sorted(str(p) for p in root.rglob("*.yaml"))
    except OSError as e:
        raise fail("bad-request", detail=f"{directory}: cannot list it ({os_reason(e)})",
                   fix="give a readable directory of problem files") from None
    if not paths:
        raise fail("bad-request", detail=f"no *.yaml under {directory}",
                   fix="give a directory of problem files")
    out = []
    for p in paths:
        try:
            out.append(Task(p, read_text(p)))
        except TcplanError as e:  # unreadable: the worker's load reports it as the row
            out.append(Task(p, f"# unreadable: {e.message}\n"))
    return out


def solve_row(task: Task, check: str = "full", seed: int = 0) -> dict[str, Any]:
    """One problem, in a worker: solve or verify, then its expectations.  Never raises."""
    t0 = time.perf_counter()
    _fault_injection(task)
    try:
        row = _row(task, check, seed)
    except Exception as e:  # noqa: BLE001 - a tcplan bug: reported as the row's failure
        where = traceback.extract_tb(e.__traceback__)[-1]
        row = {"problem": task.path, "status": "crashed", "ok": False,
               "why": f"{type(e).__name__}: {str(e)[:200]} ({where.filename}:{where.lineno})"}
    row.setdefault("time", round(time.perf_counter() - t0, 3))
    row.setdefault("why", "")
    return {"path": task.path, **row}


def _row(task: Task, check: str, seed: int) -> dict[str, Any]:
    from . import api
    from .expect import expectations
    from .kinds import kind_of
    try:
        problem = api.loads(task.text, task.path)
    except TcplanError as err:
        return {"problem": task.path, "status": "bad input", "ok": False,
                "why": err.message, "time": 0.0}
    try:
        res = (api.solve(problem, verify=check, seed=seed) if kind_of(problem).solvable
               else api.verify(problem, seed=seed))
        r, code = res.to_json(), res.exit_code
    except TcplanError as err:  # what the command line would print, with its exit code
        r, code = {"error": err.to_json()}, (2 if err.kind == "input" else 1)
    return expectations(problem, r, code, check)


def _fault_injection(task: Task) -> None:
    root = os.environ.get(CRASH_ENV)
    if not root or "# tcplan-test: kill-worker" not in task.text:
        return
    marker = pathlib.Path(root) / (pathlib.Path(task.path).name + ".attempted")
    if "# tcplan-test: kill-worker-once" in task.text and marker.exists():
        return
    marker.touch()
    os._exit(70)  # as a worker killed by the OS would vanish: no row, no exception


def lost_row(task: Task, retries: int = 1) -> dict[str, Any]:
    """A problem whose worker process died on every try: killed, out of memory, or a crash
    below Python."""
    return {"path": task.path, "problem": task.path, "status": "lost", "ok": False,
            "why": f"its worker process was lost {retries + 1} times (retried "
                   f"{'once' if retries == 1 else f'{retries} times'}): killed, out of "
                   "memory, or a crash below Python", "time": 0.0}


class Backend:
    """Runs tasks, yielding each row as it finishes (any order)."""

    name = ""

    def run(self, tasks: list[Task], jobs: int, check: str, seed: int,
            address: str | None) -> Iterator[dict[str, Any]]:
        raise NotImplementedError


class LocalBackend(Backend):
    """A pool of worker processes on this machine (spawned: each imports tcplan once).  At
    most ``jobs`` problems are in flight, so when a worker dies the problems it may have
    been running are known: each is retried alone, in a fresh process, and reported lost if
    that one dies too."""

    name = "local"

    def run(self, tasks, jobs, check, seed, address):
        if address:
            raise fail("bad-request", detail="--address names a cluster's scheduler; the "
                       "local backend has none", fix="use --backend dask, or drop --address")
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool
        ctx = multiprocessing.get_context("spawn")
        todo = list(reversed(tasks))
        suspects: list[Task] = []
        while todo:
            with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
                running: dict[Any, Task] = {}
                try:
                    while todo or running:
                        while todo and len(running) < jobs:
                            t = todo.pop()
                            running[pool.submit(solve_row, t, check, seed)] = t
                        done, _ = wait(running, return_when=FIRST_COMPLETED)
                        for f in done:
                            row = f.result()  # (raises when the pool broke)
                            running.pop(f)
                            yield row
                except BrokenProcessPool:
                    suspects += running.values()  # one of them took its worker down
        for t in suspects:
            yield self._alone(t, check, seed, ctx)

    @staticmethod
    def _alone(task: Task, check: str, seed: int, ctx) -> dict[str, Any]:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool
        LOG.info("%s: its worker was lost; retrying it alone", task.path)
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            try:
                return pool.submit(solve_row, task, check, seed).result()
            except BrokenProcessPool:
                return lost_row(task)


class DaskBackend(Backend):
    """A Dask cluster (dask.distributed): ``address`` connects to a running scheduler;
    without one, a local cluster of ``jobs`` single-threaded worker processes is started.
    Each task ships the problem's text and returns its row (a few KiB each way); its key is
    unique to this batch.  The local cluster's scheduler retries a task whose worker dies
    once (``allowed-failures: 1``) and then reports it lost, and holds at most one task on
    a worker at a time (``worker-saturation: 1.0``), so a dying worker takes no innocent
    problem down with it.  A running cluster keeps its own settings; the row says how many
    times it retried."""

    name = "dask"

    def run(self, tasks, jobs, check, seed, address):
        try:
            import dask
            from dask.distributed import Client, LocalCluster, as_completed
            from distributed.scheduler import KilledWorker
        except ImportError:
            raise fail("bad-request", detail="the dask backend needs Dask (dask.distributed)",
                       fix="pip install 'tcplan[dask]'") from None
        settings = {"distributed.scheduler.allowed-failures": 1,
                    "distributed.scheduler.worker-saturation": 1.0}
        with dask.config.set(settings):
            if address:
                client, cluster = _connect(Client, address), None
            else:
                cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
                client = Client(cluster)
            try:
                retries = _allowed_failures(client)
                run = uuid.uuid4().hex  # (keys of this batch only: a shared scheduler
                futures = {client.submit(solve_row, t, check, seed, pure=False,  # caches)
                                         key=f"tcplan-{run}-{i}"): t
                           for i, t in enumerate(tasks)}
                for f in as_completed(futures):
                    t = futures[f]
                    try:
                        yield f.result()
                    except KilledWorker:
                        yield lost_row(t, retries)
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()


def _allowed_failures(client) -> int:
    """How many times the scheduler retries a task whose worker dies (a running cluster
    keeps its own setting; the local one started here retries once)."""
    try:
        return int(client.run_on_scheduler(lambda dask_scheduler: dask_scheduler
                                           .allowed_failures))
    except Exception:  # noqa: BLE001 - an older scheduler: its documented default
        return 3


def _connect(client_cls, address: str):
    try:
        return client_cls(address, timeout="5s")
    except (OSError, TimeoutError, ValueError) as e:
        raise fail("bad-request", detail=f"--address {address}: no Dask scheduler answers "
                   f"({type(e).__name__})", fix="start one (dask scheduler) or drop "
                   "--address for a local cluster") from None


BACKENDS: dict[str, Backend] = {b.name: b for b in (LocalBackend(), DaskBackend())}


def read_results(path: str) -> dict[str, dict[str, Any]]:
    """The rows a results file holds, by path (a line cut short by an interruption, or not a
    row, is left out: its problem runs again)."""
    rows: dict[str, dict[str, Any]] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if _is_row(row):
                    rows[row["path"]] = row
    except FileNotFoundError:
        pass
    except OSError as e:
        raise fail("bad-request", detail=f"--results {path}: cannot read it "
                   f"({os_reason(e)})", fix="give a readable file") from None
    return rows


#: what a row holds, with its type: a line without them is no row (its problem runs again)
ROW_FIELDS = {"path": str, "problem": str, "status": str, "ok": bool, "why": str}


def _is_row(row: Any) -> bool:
    return isinstance(row, dict) and all(isinstance(row.get(k), t)
                                         for k, t in ROW_FIELDS.items())


def run_batch(tasks: list[Task], backend: str = "local", jobs: int = 2, check: str = "full",
              seed: int = 0, address: str | None = None, results: str | None = None,
              resume: bool = False, on_row: Callable[[dict, int, int], None] | None = None
              ) -> list[dict[str, Any]]:
    """Every task's row, sorted by path; with ``results``, each row appended to that JSON
    Lines file as it finishes (flushed), and with ``resume``, the rows already there kept and
    their problems not run again."""
    if resume and not results:
        raise fail("bad-request", detail="--resume keeps the rows of a results file; none "
                   "was given", fix="add --results FILE.jsonl")
    done = read_results(results) if (results and resume) else {}
    todo = [t for t in tasks if t.path not in done]
    if done:
        LOG.info("resuming: %d of %d problem(s) already in %s", len(tasks) - len(todo),
                 len(tasks), results)
    rows = [done[t.path] for t in tasks if t.path in done]
    out = None
    if results:
        try:
            out = open(results, "a" if resume else "w", encoding="utf-8")
            if resume and out.tell() and _cut_short(results):
                out.write("\n")  # (a row cut short by the interruption stays apart)
        except OSError as e:
            raise fail("bad-request", detail=f"--results {results}: cannot write it "
                       f"({os_reason(e)})", fix="give a writable path") from None
    try:
        if todo:
            for row in BACKENDS[backend].run(todo, jobs, check, seed, address):
                rows.append(row)
                if out is not None:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                if on_row is not None:
                    on_row(row, len(rows), len(tasks))
    finally:
        if out is not None:
            out.close()
    order = {t.path: i for i, t in enumerate(tasks)}
    return sorted(rows, key=lambda r: order.get(r["path"], len(order)))


def _cut_short(path: str) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def untimed(row: dict[str, Any]) -> dict[str, Any]:
    """A row without its seconds: what any backend gives byte for byte."""
    return {k: v for k, v in row.items() if k not in TIME_FIELDS}
