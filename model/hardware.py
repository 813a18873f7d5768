"""Every hardware constant tcplan uses, each cited to its seed and its docs/hardware.md section.

``docs/hardware.md`` states the facts with their seed sources (sections 1-8) and the points
it resolves (section 9, R1-R16).
Nothing else in the code base may spell one of these numbers as a literal.
"""

from __future__ import annotations

# --- Sequencer limits (seed 000 "제약 조건"; docs/hardware.md section 2) -------------------------
#: At most this many loop entries per sequencer config (seed 000, "엔트리 한도").
MAX_SEQUENCER_ENTRIES = 8
#: Each entry iterates at most this many times (seed 000, "반복 한도": size <= 65,536).
MAX_ENTRY_ITERATIONS = 65_536
#: The bytes of one sequencer access: a Commit packet, a Fetch read (seed 000, "패킷 크기";
#: docs/hardware.md R1: these limits belong to the Fetch/Commit sequencers only; a Fetch reads
#: a larger packet in several reads: book moving-tensors/fetch-engine.md 'Multi-Read Packet',
#: docs/decisions.md item 96).
ACCESS_BYTES = (1, 2, 4, 8, 16, 32)
#: Strides an innermost entry may have for a contiguous access (seed 000, "패킷 페치").
CONTIGUOUS_INNERMOST_STRIDES = (0, 1)

# --- DMA (seed 002; docs/hardware.md section 6) ------------------------------------------------
#: Largest DMA packet: 256 beats x 16 B (docs/hardware.md section 6 and R1).
DMA_MAX_PACKET_BYTES = 4_096

# --- Element types (docs/hardware.md section 2: strides are in elements of the dtype) -----------
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

# --- Tiers (seed 001 "제약 조건"; docs/hardware.md section 3 and R4) ---------------
#: Clusters per chip (seed 001: Cluster::SIZE == 2).
CLUSTERS_PER_CHIP = 2
#: Cluster mapping sizes accepted (docs/hardware.md R4: 1 or 2, pad with #).
CLUSTER_SIZES = (1, 2)
#: Slices per cluster (seed 001: Slice::SIZE == 256).
SLICES_PER_CLUSTER = 256
#: Slice mapping sizes accepted (docs/hardware.md R4: the DMA examples use 64).
SLICE_SIZES = (64, 128, 256)
#: Lanes per slice in the TRF (seed 001: Lane::SIZE <= 8).
MAX_LANES = 8
#: Capacity per unit in bytes (seed 001 table; docs/hardware.md section 3).
DM_BYTES_PER_SLICE = 512 * 1024
TRF_BYTES_PER_LANE = 8 * 1024
VRF_BYTES_PER_SLICE = 8 * 1024
HBM_BYTES_PER_CHIP = 48 * 2**30  # docs/hardware.md section 5: 48 GB per chip

# --- DM geometry and addresses (docs/hardware.md section 4 and R10) --------------
DMNS_PER_CLUSTER = 8
SLICES_PER_DMN = 32
#: One slice's virtual address window (4 MiB, of which 512 KiB is backed).
DM_SLICE_STRIDE = 2**22
#: Distance between two DMNs' slices (32 slices).
DM_DMN_STRIDE = SLICES_PER_DMN * DM_SLICE_STRIDE
#: Distance between the two clusters' DM.
DM_CLUSTER_STRIDE = DMNS_PER_CLUSTER * DM_DMN_STRIDE

# --- DM banks, Fetch and Commit (docs/hardware.md section 4) -----------------------
#: A slice's 16 banks, each 8 bytes wide: address bits 0-2 are the byte, 3-6 the bank.
DM_BANKS_PER_SLICE = 16
DM_BANK_BYTES = 8
#: Bytes of one bank stripe (128 consecutive bytes touch every bank once).
DM_BANK_STRIPE = DM_BANKS_PER_SLICE * DM_BANK_BYTES
#: While a DMA is active, a Fetch or Commit must not access one bank this many times in a
#: row (the DMA, lowest in the bank's priority, would wait past the NoC's 4,096-cycle
#: timeout: a cluster reset; seed 002 '시작 지연 시간과 패킷 분할'; book:
#: moving-tensors/memory-performance.md, (256 / 128) x 64 x 32 = 4,096).
DM_BANK_STARVATION_ACCESSES = 64
#: The Fetch Engine reads at most this many bytes per hardware read, one read per cycle;
#: a main-context read is the largest power-of-two bytes dividing the packet's contiguous
#: access, a sub-context read is 8 bytes (book: moving-tensors/fetch-engine.md,
#: 'Multi-Read Packet').
FETCH_MAX_READ_BYTES = 32
SUB_CONTEXT_ACCESS_BYTES = 8
#: The Commit Engine writes whole 8-byte bank words: every stride and the written packet are
#: multiples of 8 bytes (book: moving-tensors/commit-engine.md, 'Constraints').
COMMIT_ALIGN_BYTES = 8
#: The Tensor Unit's two execution contexts (main and sub), each with its own Fetch and
#: Commit sequencer; main-context accesses win a bank over sub-context ones.
TU_CONTEXTS = ("main", "sub")
#: The contexts a kernel's operations are scheduled on: the Tensor Unit's two and the DMA's
#: (book: scheduling/schedule.md 'Execution contexts').
SCHEDULE_CONTEXTS = ("main", "sub", "dma")
#: What the Vector Engine serves, one context at a time (book: scheduling/schedule.md 'a
#: main-context Vector Engine operation and a sub-context Vector Engine operation cannot
#: occupy that resource simultaneously'): its chains, the Cast Engine on top of it
#: (commit-adapter.md 'Type Casting': a cast 'occupies' it) and its Inter-Slice Reducer.
VECTOR_ENGINE_OPS = ("chain", "vector", "expression", "cast", "inter_slice_reduce")

# --- DMA engines (docs/hardware.md section 6 and R8) -----------------------------
#: One DMA engine per DMN pair: 4 per cluster, 8 per chip.
DMA_ENGINES_PER_CLUSTER = DMNS_PER_CLUSTER // 2
#: DM writes must be 8-byte aligned; HBM <-> DM needs read, write and packet 8-byte aligned.
DMA_DM_WRITE_ALIGN = 8
DMA_HBM_DM_ALIGN = 8

# --- HBM address decode (docs/hardware.md section 5 and R11) ---------------------
HBM_STACK_BIT = 8
HBM_CHANNEL_BITS = (9, 10, 11, 12)
#: channel bit i = b(9+i) ^ b(13+i) ^ b(21+i) ^ b(25+i)
HBM_CHANNEL_XOR_OFFSETS = (0, 4, 12, 16)
HBM_BANK_BITS = (17, 18)
HBM_BANK_GROUP_BITS = (13, 19)
HBM_SLICE_BIT = 20
HBM_ROW_LOW_BIT = 21
#: The HBM decode repeats every 2**29 bytes: the highest bit it reads for a channel, bank or
#: bank group is 28 (b(25 + 3)); above, only the row changes, by the same amount for every
#: address moved together, and the cycle model counts rows by equality (a switch, a
#: first open).  A tensor moved by a multiple of it costs the same (planner/op_cache.py).
HBM_DECODE_PERIOD = 1 << (max(HBM_CHANNEL_BITS) + max(HBM_CHANNEL_XOR_OFFSETS) + 1)
#: Channels per chip: the stack bit times the four hashed channel bits.
HBM_CHANNELS = 2 << len(HBM_CHANNEL_BITS)
#: Banks per channel: two bank bits, two bank-group bits and the slice bit.
HBM_BANKS = 1 << (len(HBM_BANK_BITS) + len(HBM_BANK_GROUP_BITS) + 1)

# --- DMA timing (docs/hardware.md sections 4-6 and R12; the cycle model) ---------
#: Start-up cycles of every DMA command.
DMA_STARTUP_CYCLES = 500
#: One AXI request moves at most this many bytes; a packet is ceil(bytes / 256) requests.
DMA_REQUEST_BYTES = 256
#: An engine moves one request per cycle when both sides keep up (256 B/cycle).
DMA_ENGINE_BYTES_PER_CYCLE = 256
#: Each DMN moves 128 B/cycle (docs/hardware.md section 4).
DMN_BYTES_PER_CYCLE = 128
#: A 256-byte request occupies its HBM channel 256 B / 48 GB/s = 5.33 cycles at 1 GHz.
HBM_REQUEST_CYCLES = 256 / 48
#: A request that switches its bank's open row costs ~40 cycles (docs/hardware.md section 5).
HBM_ROW_SWITCH_CYCLES = 40
#: PCIe DMA bandwidth (docs/hardware.md section 6).
PCIE_BYTES_PER_CYCLE = 30

# --- Vector Engine (seed 003; docs/hardware.md section 7) ----------------------------------------
#: Lanes of an 8-way flit; a 4-way flit carries half (seed 003 "Narrow").
VE_PACKET_LANES = 8
#: VRF bytes a Tensor Unit invocation reserves when it stashes (seed 003 "피연산자").
VE_STASH_RESERVED_BYTES = 1_024
#: Elements one group may hold inside the pair axis: the VE register-file cache, 1,024 B of
#: 4-byte elements (furiosa-opt vector_intra_slice_unzip check).
VE_UNZIP_MAX_INNER = 256
#: Accumulator slots of the intra-slice reducer (furiosa-opt IntraSliceReduce check).
VE_REDUCE_SLOTS = 8
#: Immediate registers per pass; the register-file port comes last (seed 003 "Tag").
VE_IMMEDIATES = 3

# --- Contraction Engine Lane Folder (seed 004; docs/hardware.md section 8) -----------------------
#: Input Packet sizes after the Packet Reducer, per lane.
LANE_FOLD_PACKETS = (1, 2, 4, 8, 16, 32)
#: Lane sizes the folder accepts (furiosa-opt contract_lane check).
LANE_FOLD_LANES = (1, 2, 4, 8)
#: Width of the output bus in elements (one flit per cycle).
LANE_FOLD_BUS = 8

# --- The Tensor Unit's engines between Fetch and Commit (book: computing-tensors/; issue 29) ----
#: Every engine after the Collect Engine consumes one 32-byte flit per cycle per slice (book:
#: computing-tensors/index.md 'Tensor Unit', collect-engine.md).
FLIT_BYTES = 32
#: The Cast Engine's conversions, input type -> output types (book: cast-engine.md 'Supported
#: Casts'; i4 is not a tcplan element type: docs/decisions.md item 96).
CAST_ENGINE_CASTS = {"i32": ("i4", "i8", "i16"), "f32": ("f8e5m2", "f8e4m3", "bf16")}
#: The Fetch Adapter's type casts, input type -> output types (book: computing-tensors/
#: fetch-adapter.md 'Type Casting': every widening lands in i32 / f32, f32 -> bf16 the one
#: narrowing; i4 -> i32 too, i4 not a tcplan element type), the latency a cast adds ('1 to 2
#: cycles': the upper figure) and the output bytes it makes a cycle (a fetch's cast output
#: fits one flit: 'Type casting adds an additional limit on read_size').
FETCH_ADAPTER_CASTS = {"i8": ("i32",), "i16": ("i32",), "f8e4m3": ("f32",),
                       "f8e5m2": ("f32",), "bf16": ("f32",), "f32": ("bf16",)}
FETCH_CAST_LATENCY = 2
#: The Inter-Slice Reducer's operations by stream type (book: computing-tensors/
#: vector-engine/inter-slice-reducer.md, InterSliceReduceOpI32 / OpF32).
INTER_SLICE_REDUCE_OPS = {"i32": ("Add", "AddSat", "Max", "Min"),
                          "f32": ("Add", "Max", "Min", "Mul")}
#: Active TRF lanes a store may fill (book: computing-tensors/register-files.md: 1, 2, 4 or 8
#: of the 8 lanes).
TRF_LANE_COUNTS = (1, 2, 4, 8)
#: The Transpose Engine (book: computing-tensors/transpose-engine.md, 'Parameters' and
#: 'Buffering Modes'): valid elements it reads from a flit a cycle (8-, 16- and 32-bit
#: elements; 16 for 4-bit, not a tcplan type), the widths a row of packets may have, the
#: most input rows by element bytes, and the columns one of its two buffers holds.
TRANSPOSE_VALID_SIZE = 8
TRANSPOSE_IN_COLS = (8, 16, 32)
TRANSPOSE_MAX_IN_ROWS = {1: 8, 2: 4, 4: 2}
TRANSPOSE_BUFFER_COLUMNS = 16
#: The Contraction Engine (book: computing-tensors/contraction-engine/): the lanes its Outer
#: stage broadcasts over (outer.md 'Constraints': Lane::SIZE in 1, 2, 4, 8), the bytes of its
#: packet (32 or 64: PackSize 1 or 2 flits), the Multiplier's widening per operand type
#: (outer.md 'Operand types'; i4 / i5 / i9 are not tcplan element types, and a float pair
#: matches exactly), and the Time Reducer's accumulator: 32 columns, 1,024 cells
#: (time-reducer.md 'Constraints'; furiosa-opt-lower TEMPORAL_ACCUMULATOR_COLS).
#: The Commit Adapter's trim keeps 8, 16, 24 or 32 bytes of each flit (book:
#: computing-tensors/commit-adapter.md 'Trimming': D[valid_size] in bytes; 32: no trim).
COMMIT_TRIM_BYTES = (8, 16, 24, 32)
#: The Commit Adapter's casts (book: commit-adapter.md 'Type Casting': f32 -> bf16, plain or
#: with a fused ReLU; furiosa-opt-std cast.rs ``CommitCast``) and the unit its converting
#: write covers before the narrowing (furiosa-opt-lower-types COMMIT_BASE_SIZE: 8 bytes; an
#: f32 -> bf16 cast reads a multiple of 8 x 2 bytes).
COMMIT_ADAPTER_CASTS = {("f32", "bf16")}
COMMIT_BASE_BYTES = 8
CONTRACT_LANES = (1, 2, 4, 8)
CONTRACT_PACKET_BYTES = (32, 64)
CONTRACT_ACCUMULATOR = {"i8": "i32", "bf16": "f32", "f8e4m3": "f32", "f8e5m2": "f32"}
CONTRACT_ACCUMULATOR_COLS = 32
CONTRACT_ACCUMULATOR_CELLS = 1024
