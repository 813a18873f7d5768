"""The C allocator tuned for tcplan's runs (docs/decisions.md item 143).

A graph's run allocates and frees arrays of tens of megabytes op after op (a stream's
gather, a layout, a reference in float64).  glibc's ``malloc`` maps each block past its
mmap threshold afresh and gives freed memory back at once, so every such array costs a
page fault per 4 KiB page touched: a third of a decode layer's solve was the kernel's
(measured: 3.9 s of system time in 10 s).  The command line raises the threshold and
keeps freed memory for the next block instead (``mallopt``), as the environment's
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_TOP_PAD_`` would;
where there is no glibc it does nothing.  numpy's requests for huge pages are turned off
as well (:func:`small_pages`).  Only the allocator's policy changes: no value computed
does.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: ``mallopt`` parameters (glibc's malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
#: blocks below this come from the heap (reused), not a mapping of their own
MMAP_THRESHOLD = 256 << 20
#: free memory at the heap's top kept up to this, not given back
TRIM_THRESHOLD = 1 << 30
#: the heap grown by this much more than asked, each time it grows
TOP_PAD = 64 << 20


def tune() -> bool:
    """numpy's huge pages off (:func:`small_pages`), and the three parameters set;
    whether the C library took them (False without glibc)."""
    small_pages()
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return all(mallopt(p, v) == 1 for p, v in ((M_MMAP_THRESHOLD, MMAP_THRESHOLD),
                                                (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                                                (M_TOP_PAD, TOP_PAD)))


def small_pages() -> None:
    """numpy asks for transparent huge pages on every array of 4 MiB or more
    (``madvise``); where the kernel compacts memory to find them (``defrag: madvise``, as
    here) a first touch may stall for a tenth of a second, so a run took 9.1 to 10.6 s
    from one time to the next.  Off, as ``NUMPY_MADVISE_HUGEPAGE=0`` would set it before
    numpy's import (numpy's own switch, private but kept since numpy 1.20)."""
    import numpy as np
    core = getattr(np, "_core", None) or getattr(np, "core", None)
    switch = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if switch is not None:
        switch(False)
