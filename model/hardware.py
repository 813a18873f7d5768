"""Every hardware constant tcplan uses, each cited to the seed or facts section it comes from.

Seeds live in ``../shared/seeds/``; ``facts.md`` and ``decisions.md`` in ``../shared/spec/``.
Nothing else in the code base may spell one of these numbers as a literal.
"""

from __future__ import annotations

# --- Sequencer limits (seed 000 "제약 조건"; facts.md section 2) -------------------------
#: At most this many loop entries per sequencer config (seed 000, "엔트리 한도").
MAX_SEQUENCER_ENTRIES = 8
#: Each entry iterates at most this many times (seed 000, "반복 한도": size <= 65,536).
MAX_ENTRY_ITERATIONS = 65_536
#: Fetch/Commit packet sizes in bytes (seed 000, "패킷 크기"; decisions.md item 1:
#: these limits belong to the Fetch/Commit sequencers only).
FETCH_COMMIT_PACKET_BYTES = (1, 2, 4, 8, 16, 32)
#: Strides an innermost entry may have for a contiguous access (seed 000, "패킷 페치").
CONTIGUOUS_INNERMOST_STRIDES = (0, 1)

# --- DMA (seed 002; facts.md section 6) ------------------------------------------------
#: Largest DMA packet: 256 beats x 16 B (facts.md section 6; decisions.md item 1).
DMA_MAX_PACKET_BYTES = 4_096

# --- Element types (facts.md section 2: strides are in elements of the dtype) -----------
#: Bytes per element for every dtype the tools accept.
DTYPE_BYTES = {
    "i8": 1,
    "i16": 2,
    "i32": 4,
    "f32": 4,
    "bf16": 2,
    "f16": 2,
    "f8e4m3": 1,
    "f8e5m2": 1,
}
