"""Progress of the long stages on stderr (issue 17, item 3; docs/decisions.md item 87).

The executor and the search report through a plain callback, ``progress(stage, done,
total, note)``, and know nothing of terminals; :class:`Progress` is the callback the command
line hands them.  On a terminal it draws one tqdm bar per stage, redrawn in place; in a log
(stderr not a terminal) it writes a plain line through the ``tcplan`` logger every few
seconds.  A stage that ends within ``delay`` seconds shows nothing: short runs stay quiet.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, TextIO

#: the callback's shape: (stage, done, total or None when open-ended, a short note)
Callback = Callable[[str, int, "int | None", str], None]

LOG = logging.getLogger("tcplan")


@dataclass
class _Stage:
    start: float
    done: int = 0
    logged: float | None = None  # when its last plain line was written
    bar: Any = None  # its tqdm bar, once shown


class Progress:
    """The command line's progress callback: bars on a terminal, lines in a log."""

    def __init__(self, stream: TextIO, tty: bool, delay: float = 1.0, every: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.stream, self.tty, self.delay, self.every, self.clock = (
            stream, tty, delay, every, clock)
        self.stages: dict[str, _Stage] = {}

    def __call__(self, stage: str, done: int, total: int | None = None,
                 note: str = "") -> None:
        now = self.clock()
        st = self.stages.get(stage)
        if st is None or done < st.done:  # a new run of the stage
            self.finish(stage)
            st = self.stages[stage] = _Stage(now)
        st.done = done
        if now - st.start >= self.delay:
            (self._draw if self.tty else self._log)(stage, st, now, done, total, note)
        if total is not None and done >= total:
            self.finish(stage)

    def _draw(self, stage: str, st: _Stage, now: float, done: int, total: int | None,
              note: str) -> None:
        if st.bar is None:  # first drawn where the stage stands
            from tqdm import tqdm
            st.bar = tqdm(total=total, desc=stage, file=self.stream, leave=False,
                          unit_scale=True, dynamic_ncols=True, initial=done,
                          postfix=note or None)
            return
        if note:
            st.bar.set_postfix_str(note, refresh=False)
        st.bar.update(done - st.bar.n)

    def _log(self, stage: str, st: _Stage, now: float, done: int, total: int | None,
             note: str) -> None:
        if st.logged is not None and now - st.logged < self.every:
            return
        st.logged = now
        count = (f"{done:,}/{total:,} ({100 * done // max(total, 1)}%)" if total is not None
                 else f"{done:,}")
        LOG.info("%s: %s%s (%.0f s)", stage, count, f"; {note}" if note else "",
                 now - st.start)

    def finish(self, stage: str) -> None:
        """The stage is over: its bar goes; a stage that logged says how long it took."""
        st = self.stages.pop(stage, None)
        if st is None:
            return
        if st.bar is not None:
            st.bar.close()
        if st.logged is not None:
            LOG.info("%s: done in %.1f s", stage, self.clock() - st.start)

    def close(self) -> None:
        for stage in list(self.stages):
            self.finish(stage)


def for_stream(stream: TextIO) -> Progress | None:
    """The command line's progress for ``stream`` (stderr), or None when -q silences it."""
    if not LOG.isEnabledFor(logging.INFO):
        return None
    return Progress(stream, hasattr(stream, "isatty") and stream.isatty())
