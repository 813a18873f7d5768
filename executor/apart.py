"""Checks run apart: an op's check in a forked process while the graph's run goes on
(issue 32, item 5; docs/graphs.md 'At scale').

A graph's run is one sequence of ops over one set of memories, but the check of an op
whose kind says ``checks_apart`` (``Kind.checks_apart``: a contraction, whose own graph of
Fetches, engines and Commit is most of a decode layer's run) needs nothing of the run but
the op's operands.  The run replays such an op (``Kind.replay``: the engine's own values,
written where its plan puts them), goes on, and a forked child runs the op in full on
memories of its own (``Kind.execute``: every step checked) and compares what it made with
the replayed values, bit for bit.  At most ``jobs`` children run at once.  A failure is
raised in the order of the run: a child's before any failure of a later step.
"""

from __future__ import annotations

import os
import pickle
import signal
import traceback
from collections import deque
from typing import Callable

from tcplan.model.rules import TcplanError


class CheckDied(RuntimeError):
    """A check run apart ended without a verdict (its process was killed, or crashed)."""


class Apart:
    """The checks running apart, oldest first: (op name, process id, read end)."""

    def __init__(self, jobs: int):
        self.jobs = jobs if hasattr(os, "fork") else 0
        self.pending: deque[tuple[str, int, int]] = deque()
        self.started = 0

    def usable(self) -> bool:
        return self.jobs > 0

    def start(self, name: str, check: Callable[[], None]) -> None:
        """``check`` (raising :class:`TcplanError` where the op fails) run in a forked
        child; waits first for the oldest while ``jobs`` run."""
        while len(self.pending) >= self.jobs:
            self._join(self.pending.popleft())
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (its verdict is what the tests see)
            os.close(r)
            _child(check, w)
        os.close(w)
        self.pending.append((name, pid, r))
        self.started += 1

    def finish(self) -> None:
        """Wait for every check, oldest first; raise the first failure."""
        try:
            while self.pending:
                self._join(self.pending.popleft())
        finally:
            self.close()

    def close(self) -> None:
        """Stop the checks still running (a failure before them ends the run)."""
        while self.pending:
            _, pid, r = self.pending.popleft()
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # pragma: no cover - it ended meanwhile
                pass
            os.close(r)
            os.waitpid(pid, 0)

    @staticmethod
    def _join(item: tuple[str, int, int]) -> None:
        name, pid, r = item
        chunks = []
        with os.fdopen(r, "rb") as f:
            while chunk := f.read(1 << 16):
                chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        try:
            tag, value = pickle.loads(b"".join(chunks))
        except Exception:
            raise CheckDied(f"the check of op {name}, run apart, ended without a verdict "
                            f"(wait status {status})") from None
        if tag == "raise":
            raise value
        if tag == "crash":
            raise CheckDied(f"the check of op {name}, run apart, crashed:\n{value}")


def _child(check: Callable[[], None], w: int) -> None:  # pragma: no cover - in the child
    """Run ``check``, write its verdict, and leave at once (nothing of the parent's exit
    handlers or buffers runs here)."""
    try:
        try:
            check()
            verdict: tuple = ("ok", None)
        except TcplanError as e:
            verdict = ("raise", e)
        except BaseException:
            verdict = ("crash", traceback.format_exc())
        try:
            data = pickle.dumps(verdict)
        except Exception:
            data = pickle.dumps(("crash", traceback.format_exc()))
        with os.fdopen(w, "wb") as f:
            f.write(data)
    finally:
        os._exit(0)
