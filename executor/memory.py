"""Simulated memories: HBM per chip, DM per chip (virtual addresses), host memory.

Arrays are zeroed byte arrays (anonymous ``mmap``) sized to the address space a problem can touch; the
zeroed allocation maps pages lazily, so untouched parts cost no memory.  Every access is
bounds-checked against its tier (HBM: 48 GB per chip; DM: the 512 KiB backed part of each 4 MiB
slice window, docs/hardware.md R10), and addresses holding Bottom padding (``#{!}``) may not be
read or written.
"""

from __future__ import annotations

import mmap

import numpy as np

from tcplan.model import hardware as hw
from tcplan.model import limits
from tcplan.model.rules import TcplanError, Violation

DM_BACKED_SHIFT = hw.DM_BYTES_PER_SLICE.bit_length() - 1  # 512 KiB backed per slice
DM_WINDOW_SHIFT = hw.DM_SLICE_STRIDE.bit_length() - 1  # 4 MiB virtual window per slice


def _access_error(tier: str, addr: int, why: str) -> TcplanError:
    return TcplanError(Violation("memory-access", (f"{addr:#x}",), {
        "tier": tier, "address": f"{addr:,} ({addr:#x})", "why": why}))


def lazy_zeros(n: int, dense: bool = False) -> np.ndarray:
    """``n`` zero bytes mapped page by page as they are touched.  An anonymous ``mmap``
    rather than ``np.zeros``: numpy asks the kernel for 2 MiB transparent huge pages on large
    allocations, so touching one byte of each 512 KiB DM slice window would make a 256 MiB
    DM resident whole (2 GiB for a four-chip problem moving a few KiB).  ``dense`` (HBM and
    host spans, which the tensors fill): ask for huge pages after all, 512 times fewer page
    faults where a transfer touches every page."""
    if n <= 0:
        return np.zeros(0, np.uint8)
    m = mmap.mmap(-1, n)
    if dense and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # pragma: no cover - a kernel without transparent huge pages
            pass
    return np.frombuffer(m, np.uint8)


class Space:
    """One address space (one chip's HBM, one chip's DM, or the host)."""

    def __init__(self, tier: str, limit: int, size: int, lo: int = 0):
        self.tier = tier
        self.limit = limit  # the tier's capacity in bytes
        self.lo = lo  # first physical byte held (HBM tensors may sit high in 48 GB)
        # zeroed allocations: pages are mapped when first touched
        self.dense = tier != "dm"  # the tensors fill HBM and host spans; DM windows are sparse
        self.data = lazy_zeros(max(0, min(size, limit - lo)), self.dense)
        self.writes = lazy_zeros(self.data.size, self.dense)  # writes per byte (saturating)
        #: Bottom padding (#{!}): a byte mask over ``data`` (1 where never to be touched),
        #: mapped lazily like it; None while the space has none
        self.bottom: np.ndarray | None = None

    def physical(self, addr: np.ndarray) -> np.ndarray:
        """Virtual -> physical byte index, bounds-checked."""
        addr = np.asarray(addr, np.int64)
        if addr.size == 0:
            return addr
        if self.tier == "dm":
            off = addr & ((1 << DM_WINDOW_SHIFT) - 1)
            bad = (off >> DM_BACKED_SHIFT) != 0
            if bad.any() or (addr < 0).any():
                a = int(addr[bad][0]) if bad.any() else int(addr[addr < 0][0])
                raise _access_error("dm", a, "past the 512 KiB backed part of its slice window")
            phys = ((addr >> DM_WINDOW_SHIFT) << DM_BACKED_SHIFT) | off
        else:
            phys = addr
        lo, hi = int(phys.min()), int(phys.max())
        if lo < 0 or hi >= self.limit:
            a = lo if lo < 0 else hi
            raise _access_error(self.tier, a, f"outside the {self.tier.upper()} address space "
                                      f"({self.limit:,} B)")
        if lo < self.lo or hi >= self.lo + self.data.size:
            a = lo if lo < self.lo else hi
            raise _access_error(self.tier, a, f"outside every tensor the problem placed in "
                                              f"{self.tier.upper()} ([{self.lo:,}, "
                                              f"{self.lo + self.data.size:,}))")
        return phys - self.lo

    def _check_bottom(self, phys: np.ndarray) -> None:
        if self.bottom is not None and phys.size:
            hit = self.bottom[phys] != 0  # (one lookup a byte: a mask, not a set search)
            if hit.any():
                raise _access_error(self.tier, int(phys[hit][0]) + self.lo,
                                    "Bottom padding (#{!}) is never read or written")

    def forbid(self, phys: np.ndarray) -> None:
        """Add Bottom-padding bytes (physical indices) to the forbidden set."""
        if self.bottom is None:
            self.bottom = lazy_zeros(self.data.size, self.dense)
        self.bottom[np.asarray(phys, np.int64)] = 1

    def release(self, lo: int, hi: int) -> None:
        """Give the whole pages of physical bytes ``[lo, hi)`` (addresses, as placed) back to
        the system: they read as zeros again (a dead tensor's, docs/decisions.md item
        130), in the data, the write counters and the Bottom mask."""
        page = mmap.PAGESIZE
        a = -(-max(lo - self.lo, 0) // page) * page
        b = (min(hi - self.lo, self.data.size) // page) * page
        if b <= a:
            return
        for arr in (self.data, self.writes, self.bottom):
            m = getattr(arr.base, "obj", None) if arr is not None else None
            if isinstance(m, mmap.mmap) and hasattr(mmap, "MADV_REMOVE"):
                try:  # (a shared anonymous map: REMOVE frees its pages, DONTNEED would not)
                    m.madvise(mmap.MADV_REMOVE, a, b - a)
                except OSError:  # pragma: no cover - a kernel that refuses: kept mapped
                    pass

    def reset_writes(self) -> None:
        # a fresh zeroed allocation, mapped lazily (writing zeros would touch every page)
        self.writes = lazy_zeros(self.data.size, self.dense)

    def read(self, addr: np.ndarray, nbytes: int = 1) -> np.ndarray:
        """Bytes at ``addr`` (each of ``nbytes`` consecutive bytes): shape (len, nbytes)."""
        phys = self.physical(addr)
        if nbytes > 1 and phys.size:
            self.physical(np.array([int(np.asarray(addr).max()) + nbytes - 1]))
        idx = phys[:, None] + np.arange(nbytes, dtype=np.int64)
        self._check_bottom(idx.ravel())
        return self.data[idx]

    def read_grid(self, bases: np.ndarray, offsets: np.ndarray, nbytes: int) -> np.ndarray:
        """:meth:`read` of every ``bases[s] + offsets[p]``: shape ``(len(bases),
        len(offsets), nbytes)``.  Where every base's offsets stay inside the backed part of
        its DM window and no Bottom padding is marked, the addresses are checked at the
        offsets' two ends (a window is linear) and read as one word each where aligned;
        else address by address, as :meth:`read` (which says where an access fails)."""
        shape = (bases.size, offsets.size, nbytes)
        if self.tier == "dm" and self.bottom is None and bases.size and offsets.size:
            lo, hi = int(offsets.min()), int(offsets.max()) + nbytes - 1
            off = bases & ((1 << DM_WINDOW_SHIFT) - 1)
            if lo >= 0 and int(off.max()) + hi < (1 << DM_BACKED_SHIFT):
                self.physical(np.concatenate([bases + lo, bases + hi]))  # (the span's ends)
                starts = self.physical(bases)
                if nbytes not in (1, 2, 4, 8) or (starts & (nbytes - 1)).any() or \
                        (offsets & (nbytes - 1)).any():
                    at = (starts[:, None] + offsets[None, :])[..., None]
                    return self.data[at + np.arange(nbytes, dtype=np.int64)]
                words = self.data[:self.data.size - self.data.size % nbytes].view(
                    f"u{nbytes}")
                got = words[(starts // nbytes)[:, None] + (offsets // nbytes)[None, :]]
                return got.view(np.uint8).reshape(shape)
        return self.read((bases[:, None] + offsets[None, :]).ravel(), nbytes).reshape(shape)

    def write(self, addr: np.ndarray, values: np.ndarray, count: bool = True) -> None:
        """Bytes into ``addr`` (each ``values.shape[1]`` consecutive ones); ``count``: raise
        their write counters (a move does; placing a tensor does not)."""
        nbytes = values.shape[1]
        phys = self.physical(addr)
        if nbytes > 1 and phys.size:
            self.physical(np.array([int(np.asarray(addr).max()) + nbytes - 1]))
        idx = phys[:, None] + np.arange(nbytes, dtype=np.int64)
        self._check_bottom(idx.ravel())
        self.data[idx] = values
        if count:
            w = self.writes[idx]  # every byte of an element counts (verify reads the first)
            self.writes[idx] = np.minimum(w, 254) + 1


class Memories:
    """All address spaces of a run: ``space(tier, chip)``.  ``extent[tier]`` is how many bytes
    of HBM / host memory the problem's tensors reach (DM always gets its whole 256 MiB, mapped
    lazily)."""

    DM_BYTES = hw.CLUSTERS_PER_CHIP * hw.SLICES_PER_CLUSTER * hw.DM_BYTES_PER_SLICE

    def __init__(self, extent: dict[str, tuple[int, int]] | None = None) -> None:
        self.spaces: dict[tuple[str, int], Space] = {}
        self.extent = extent or {}  # tier -> (first byte, end byte) the tensors reach

    def space(self, tier: str, chip: int = 0) -> Space:
        key = (tier, 0 if tier == "host" else chip)
        s = self.spaces.get(key)
        if s is None:
            limit = {"hbm": hw.HBM_BYTES_PER_CHIP, "dm": self.DM_BYTES, "host": 1 << 40}[tier]
            if tier == "dm":
                lo, hi = 0, self.DM_BYTES
            else:
                lo, hi = self.extent.get(tier, (0, 1 << 20))
            limits.check(min(hi, limit) - lo, limits.SIM_MAX_MEMORY_BYTES,
                         f"the simulated {tier.upper()} span [{lo:,}, {hi:,})", "bytes")
            try:
                s = self.spaces[key] = Space(tier, limit, hi - lo, lo)
            except (OSError, MemoryError) as e:  # the machine cannot map it
                raise limits.size_error(
                    hi - lo, f"what it can map ({getattr(e, 'strerror', None) or e})",
                    f"the simulated {tier.upper()} span [{lo:,}, {hi:,})", "bytes",
                    stage="this machine", fix="place the tensors closer together, or run "
                    "on a machine with more memory") from None
        return s

    @property
    def allocated_bytes(self) -> int:
        """Bytes allocated (virtually: pages are mapped only when touched)."""
        return sum(s.data.nbytes + s.writes.nbytes for s in self.spaces.values())
