"""The C allocator tuned for tcplan's runs (docs/decisions.md item 143).

A graph's run allocates and frees arrays of tens of megabytes op after op (a stream's
gather, a layout, a reference in float64).  glibc's ``malloc`` maps each block past its
mmap threshold afresh and gives freed memory back at once, so every such array costs a
page fault per 4 KiB page touched: a third of a decode layer's solve was the kernel's
(measured: 3.9 s of system time in 10 s).  The command line raises the threshold and
keeps freed memory for the next block instead (``mallopt``), as the environment's
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_TOP_PAD_`` would;
where there is no glibc it does nothing.  Only the allocator's policy changes: no value
computed does.
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
    """Set the three parameters; whether the C library took them (False without glibc)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return all(mallopt(p, v) == 1 for p, v in ((M_MMAP_THRESHOLD, MMAP_THRESHOLD),
                                                (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                                                (M_TOP_PAD, TOP_PAD)))
