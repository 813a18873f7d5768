"""Every sequencer example of seed 000 and docs/hardware.md section 2, with the exact expected
values."""

import pytest

from tcplan.model.mapping import parse
from tcplan.model.rules import TcplanError
from tcplan.model.sequencer import coalesce, contiguous_run, derive_text, SequencerConfig


def seq(axes, buf, time, packet, **kw):
    return derive_text(axes, buf, time, packet, **kw)


def check(cfg, raw, final, packet, run, max_access):
    assert cfg.raw_entries == raw
    assert cfg.entries == final
    assert cfg.packet_size == packet
    assert cfg.contiguous_run == run
    assert cfg.max_access_size == max_access
    assert cfg.accesses_per_packet == packet // max_access


NCHW = {"N": 4, "C": 3, "H": 8, "W": 8}


@pytest.mark.parametrize("mode", ["read", "write"])
def test_nchw_to_whcn_both_ways(mode):
    cfg = seq(NCHW, "m![N, C, H, W]", "m![W, H, C, N]", "m![1]", mode=mode, dtype="bf16")
    e = [(8, 1), (8, 8), (3, 64), (4, 192)]
    check(cfg, e, e, 1, 1, 1)  # the innermost entry strides by 192: a run of one element
    assert cfg.text() == "[8 : 1, 8 : 8, 3 : 64, 4 : 192] : 1"
    assert [x.term for x in cfg.raw] == ["W", "H", "C", "N"]


def test_transposing():
    cfg = seq({"A": 8, "B": 8, "C": 8}, "m![A, B, C # 32]", "m![B, A]", "m![C # 16]")
    e = [(8, 32), (8, 256), (16, 1)]
    check(cfg, e, e, 16, 16, 16)


def test_splitting():
    cfg = seq({"A": 8, "B": 8, "C": 4}, "m![A, B, C # 8]", "m![A % 2, B % 4, A / 2, B / 4]",
              "m![C # 32]")
    e = [(2, 64), (4, 8), (4, 128), (2, 32), (32, 1)]
    check(cfg, e, e, 32, 64, 32)  # run: 32, then 2 : 32 == 32 * 1 -> 64; 4 : 128 != 2 * 32


def test_slicing():
    cfg = seq({"A": 16, "B": 8, "C": 8}, "m![A, B, C]",
              "m![A / 4, A % 4 = 3, B / 4, B % 4 = 2]", "m![C]")
    e = [(4, 256), (3, 64), (2, 32), (2, 8), (8, 1)]
    check(cfg, e, e, 8, 16, 8)


def test_broadcasting():
    cfg = seq({"A": 16, "T": 4, "P": 4}, "m![A]", "m![T, A]", "m![P]")
    e = [(4, 0), (16, 1), (4, 0)]
    check(cfg, e, e, 4, 4, 4)
    assert [x.buffer_term for x in cfg.raw] == [None, "A", None]


def test_partial_axis_broadcast():
    # seed 000: buffer m![N % 512] read as Time m![N / 512], Packet m![N % 512]
    cfg = seq({"N": 2048}, "m![N % 512]", "m![N / 512]", "m![N % 512]")
    assert cfg.raw_entries == [(4, 0), (512, 1)]


def test_merging_nine_to_six():
    cfg = seq({"N": 8, "C": 8, "H": 8, "W": 32}, "m![N, C, H, W]",
              "m![W / 16, H % 2, H / 2, C / 2, C % 2, N / 2, N % 2, W / 8 % 2]", "m![W % 8]")
    raw = [(2, 16), (2, 32), (4, 64), (4, 512), (2, 256), (4, 4096), (2, 2048), (2, 8), (8, 1)]
    final = [(2, 16), (2, 32), (4, 64), (8, 256), (8, 2048), (16, 1)]
    check(cfg, raw, final, 8, 16, 8)
    # the last merge crosses the Time/Packet boundary
    assert cfg.groups[-1] == [7, 8]
    assert [cfg.raw[k].side for k in cfg.groups[-1]] == ["time", "packet"]


def test_contiguous_packet_read():
    cfg = seq({"N": 4, "C": 3, "H": 4, "W": 8}, "m![N, C, H, W]", "m![N, C, H]", "m![W]")
    e = [(4, 96), (3, 32), (4, 8), (8, 1)]
    check(cfg, e, e, 8, 384, 8)


def test_non_contiguous_packet_read():
    cfg = seq({"N": 4, "C": 3, "H": 4, "W": 8}, "m![N, C, H, W]", "m![C]", "m![N, H, W]")
    e = [(3, 32), (4, 96), (4, 8), (8, 1)]
    check(cfg, e, e, 128, 32, 32)
    assert cfg.accesses_per_packet == 4


def test_padded_write():
    cfg = seq({"A": 4, "B": 8}, "m![A, B # 16]", "m![1]", "m![A, B]", mode="write")
    e = [(4, 16), (8, 1)]
    check(cfg, e, e, 32, 8, 8)
    assert cfg.accesses_per_packet == 4


def test_run_of_768():
    entries = [(4, 192), (3, 64), (8, 8), (8, 1)]
    assert contiguous_run(entries) == 768
    cfg = SequencerConfig(entries, [], [], 8, "i8", "read", "pseudo")
    assert cfg.max_access_size == 8


def test_contiguous_run_of_a_striding_innermost_entry():
    # docs/decisions.md item 17: the seed's literal code would say 4 here
    assert contiguous_run([(8, 1), (4, 192)]) == 1
    assert contiguous_run([(16, 1), (4, 0)]) == 4  # a broadcast packet: one access
    assert contiguous_run([(2, 8), (8, 1)]) == 16
    assert contiguous_run([]) == 1


def test_size_one_terms_give_no_entry():
    cfg = seq({"A": 4, "B": 16, "U": 1}, "m![A, B]", "m![1]", "m![A, B]")
    assert cfg.raw_entries == [(4, 16), (16, 1)]
    cfg = seq({"A": 4, "B": 16, "U": 1}, "m![U, A, B]", "m![U, A]", "m![B]")
    assert cfg.raw_entries == [(4, 16), (16, 1)]


def test_tiling_write_masks_padding_lanes():
    # seed 000 tiling_write: a C # 32 packet written into a C # 8 buffer (docs/hardware.md R3)
    cfg = seq({"A": 8, "B": 512, "C": 4}, "m![A, B, C # 8]", "m![A % 2, B % 4, A / 2, B / 4]",
              "m![C # 32]", mode="write")
    assert cfg.raw_entries == [(2, 4096), (4, 8), (4, 8192), (128, 32), (32, 1)]


def test_strided_read_and_write():
    for mode in ("read", "write"):
        cfg = seq({"A": 8, "B": 512}, "m![A, B]", "m![A, B / 32]", "m![B % 32]", mode=mode,
                  dtype="bf16")
        assert cfg.raw_entries == [(8, 512), (16, 32), (32, 1)]
        assert cfg.packet_bytes == 64


# ---- the two rejections --------------------------------------------------------------
def test_incompatible_decomposition_a15():
    with pytest.raises(TcplanError) as ei:
        seq({"A": 15}, "m![A % 5, A / 5]", "m![1]", "m![A % 3, A / 3]")
    err = ei.value
    assert err.code == "incompatible-decomposition"
    assert "A / 3" in err.message and "A % 5" in err.message
    assert "common refinement" in err.message


def test_broadcast_write_rejected():
    with pytest.raises(TcplanError) as ei:
        seq({"A": 16, "T": 4, "P": 4}, "m![A]", "m![T, A]", "m![P]", mode="write")
    codes = [v.rule for v in ei.value.violations]
    assert codes[0] == "broadcast-write"
    terms = {t for v in ei.value.violations for t in v.terms}
    assert {"T", "P"} <= terms


# ---- further rule checks with hand-computed expectations -------------------------------
def test_entry_limit_names_the_entries():
    axes = {f"X{i}": 2 for i in range(10)}
    buf = "m![" + ", ".join(f"X{i}" for i in range(10)) + "]"
    # every adjacent stream pair strides backwards: nothing merges
    time = "m![" + ", ".join(f"X{i}" for i in range(9, -1, -1)) + "]"
    with pytest.raises(TcplanError) as ei:
        seq(axes, buf, time, "m![1]")
    assert ei.value.code == "entry-limit"
    assert "10 entries" in ei.value.message
    assert "[2 : 1, 2 : 2, 2 : 4" in ei.value.message


def test_iteration_limit():
    with pytest.raises(TcplanError) as ei:
        seq({"A": 131072, "B": 2}, "m![B, A]", "m![A]", "m![B]")
    v = ei.value.violations[0]
    assert v.rule == "iteration-limit"
    assert "131072" in v.message and "A / 65536 and A % 65536" in v.fix
    # split terms stay within the limit
    cfg = seq({"A": 131072, "B": 2}, "m![B, A]", "m![A / 2, A % 2]", "m![B]")
    assert cfg.raw_entries == [(65536, 2), (2, 1), (2, 131072)]


def test_merge_keeps_entries_within_iteration_limit():
    axes = {f"X{i}": 2 for i in range(7)} | {"A": 65536, "B": 2}
    buf = "m![" + ", ".join(f"X{i}" for i in range(7)) + ", A, B]"
    time = "m![" + ", ".join(f"X{i}" for i in range(6, -1, -1)) + ", A]"
    # 9 raw entries; A (65536 : 2) and B (2 : 1) are contiguous but would make 131072
    with pytest.raises(TcplanError) as ei:
        seq(axes, buf, time, "m![B]")
    assert ei.value.code == "entry-limit"
    assert "65536 : 2, 2 : 1]" in ei.value.message


def test_write_coverage_sliced_write():
    with pytest.raises(TcplanError) as ei:
        seq({"A": 16, "B": 8}, "m![A, B]", "m![A = 12]", "m![B]", mode="write")
    assert ei.value.code == "write-coverage"
    assert "12" in ei.value.message and "16 live values" in ei.value.message


def test_write_coverage_missing_axis():
    with pytest.raises(TcplanError) as ei:
        seq({"A": 16, "B": 8}, "m![A, B]", "m![A]", "m![1]", mode="write")
    v = ei.value.violations[0]
    assert v.rule == "write-coverage" and v.terms == ("B",)


def test_stream_outside_buffer_read():
    with pytest.raises(TcplanError) as ei:
        seq({"A": 16, "B": 8}, "m![A / 4, A % 4 = 3, B]", "m![A]", "m![B]")
    assert ei.value.code == "stream-outside-buffer"
    assert "holds 3 live values" in ei.value.message


def test_unread_axis_fetch_only():
    axes = {"A": 4, "B": 8}
    cfg = seq(axes, "m![A, B]", "m![1]", "m![B]")  # pseudo: a sub-tensor read is fine
    assert cfg.raw_entries == [(8, 1)]
    with pytest.raises(TcplanError) as ei:
        seq(axes, "m![A, B]", "m![1]", "m![B]", engine="fetch")
    assert ei.value.code == "unread-axis" and ei.value.violations[0].terms == ("A",)


def test_packet_bytes_commit_only():
    """The seed's packet sizes bind a Commit; a Fetch reads a larger packet in several reads
    (docs/decisions.md item 96)."""
    axes = {"A": 4, "B": 8}
    cfg = seq(axes, "m![A, B]", "m![A]", "m![B]", engine="fetch", dtype="i32")
    assert cfg.packet_bytes == 32
    cfg = seq(axes, "m![A, B]", "m![1]", "m![A, B]", engine="fetch", dtype="i32")  # 128 B
    assert cfg.packet_bytes == 128 and cfg.max_access_size == 32
    with pytest.raises(TcplanError) as ei:
        seq(axes, "m![A, B]", "m![1]", "m![A, B]", engine="commit", mode="write",
            dtype="i32")
    assert ei.value.code == "packet-bytes"
    with pytest.raises(TcplanError) as ei:
        seq({"A": 3, "B": 8}, "m![B, A]", "m![B]", "m![A]", engine="commit", mode="write")
    assert ei.value.code == "packet-bytes"  # 3 B


def test_innermost_access_fetch_commit():
    axes = {"A": 4, "B": 8}
    # the seed's padded write is fine for the generic sequencer but not for Commit
    with pytest.raises(TcplanError) as ei:
        seq({"A": 4, "B": 8}, "m![A, B # 16]", "m![1]", "m![A, B]", mode="write",
            engine="commit")
    assert ei.value.code == "innermost-access" and "8 : 1" in ei.value.message
    # a discrete (1-element) packet may stride anywhere
    cfg = seq(axes, "m![A, B]", "m![B, A]", "m![1]", engine="fetch")
    assert cfg.raw_entries == [(8, 1), (4, 8)]
    # a contiguous packet split into two entries is one access once merged
    cfg = seq(axes, "m![A, B]", "m![1]", "m![A, B]", engine="fetch")
    assert cfg.entries == [(4, 8), (8, 1)]
    with pytest.raises(TcplanError) as ei:  # transposed packet: stride 4 innermost
        seq(axes, "m![A, B]", "m![1]", "m![B, A]", engine="fetch")
    assert ei.value.code == "innermost-access"


def test_dma_packet_max():
    axes = {"A": 8, "B": 1024}
    cfg = seq(axes, "m![A, B]", "m![A / 2]", "m![A % 2, B]", engine="dma", dtype="f16")
    assert cfg.packet_bytes == 4096
    with pytest.raises(TcplanError) as ei:
        seq(axes, "m![A, B]", "m![A / 4]", "m![A % 4, B]", engine="dma", dtype="f16")
    assert ei.value.code == "dma-packet-max" and "8192 B" in ei.value.message


def test_engine_mode_mismatch_is_bad_request():
    for engine, mode in (("fetch", "write"), ("commit", "read")):
        with pytest.raises(TcplanError) as ei:
            seq({"A": 4}, "m![A]", "m![1]", "m![A]", engine=engine, mode=mode)
        assert ei.value.code == "bad-request"


def test_stream_pieces_span_buffer_pieces():
    # a stream term covering two buffer pieces is split into one entry per piece
    cfg = seq({"A": 16, "B": 3}, "m![A / 4, B, A % 4]", "m![A]", "m![B]")
    assert cfg.raw_entries == [(4, 12), (4, 1), (3, 4)]
    assert [e.piece for e in cfg.raw] == ["A / 4", "A % 4", None]
    # a padded stream term spanning pieces: its padding goes to the top piece
    cfg = seq({"A": 16, "B": 3}, "m![A / 4, B, A % 4]", "m![A # 20]", "m![B]")
    assert cfg.raw_entries == [(5, 12), (4, 1), (3, 4)]
    with pytest.raises(TcplanError) as ei:
        seq({"A": 16, "B": 3}, "m![A / 4, B, A % 4]", "m![A # 18]", "m![B]")
    assert ei.value.code == "incompatible-decomposition"


def test_coalesce_examples():
    assert coalesce([(2, 8), (8, 1)]) == ([(16, 1)], [[0, 1]])
    assert coalesce([(4, 0), (2, 0)]) == ([(8, 0)], [[0, 1]])
    assert coalesce([(2, 32), (4, 64)]) == ([(2, 32), (4, 64)], [[0], [1]])
    # never above the iteration limit
    assert coalesce([(2, 65536), (65536, 1)])[0] == [(2, 65536), (65536, 1)]


def test_write_coverage_names_the_missing_digits():
    with pytest.raises(TcplanError) as ei:
        seq({"A": 16}, "m![A]", "m![A % 4, A / 8]", "m![1]", mode="write")
    assert ei.value.code == "write-coverage"
    assert "nothing writes A digits [4, 8)" in ei.value.message


def test_overlapping_digits_are_rejected():
    with pytest.raises(TcplanError) as ei:
        seq({"A": 16}, "m![A / 2, A % 4]", "m![A]", "m![1]")
    assert ei.value.code == "incompatible-decomposition"
    assert "buffer terms" in ei.value.message and "A digits [2, 4)" in ei.value.message
    with pytest.raises(TcplanError) as ei:
        seq({"A": 16}, "m![A]", "m![A % 8]", "m![A / 4]")
    assert ei.value.code == "incompatible-decomposition"
    assert "stream terms" in ei.value.message and "A digits [4, 8)" in ei.value.message


def test_single_value_digit_carries_nothing():
    # m![A = 1] is m![1]: reading A from it is a broadcast, the same with or without padding
    for buf in ("m![A = 1]", "m![A = 1 # 3]"):
        cfg = seq({"A": 4}, buf, "m![1]", "m![A]")
        assert cfg.raw_entries == [(4, 0)]


def test_buffer_splits_that_are_the_whole_axis_coalesce():
    # m![A / 3, A % 3] holds exactly what m![A] holds, position by position
    for buf in ("m![A / 3, A % 3]", "m![A]"):
        cfg = seq({"A": 12}, buf, "m![A / 2, A % 2]", "m![1]")
        assert cfg.raw_entries == [(6, 2), (2, 1)], buf
    # and both read the same way on Fetch: a partial read of A is a sub-tensor, not unread-axis
    for buf in ("m![A / 4, A % 4]", "m![A]"):
        cfg = seq({"A": 16}, buf, "m![1]", "m![A % 4]", engine="fetch")
        assert cfg.raw_entries == [(4, 1)]
    with pytest.raises(TcplanError) as ei:  # a buffer term no stream digit touches is unread
        seq({"A": 16, "B": 2}, "m![A, B]", "m![1]", "m![A % 4]", engine="fetch")
    assert ei.value.code == "unread-axis" and ei.value.violations[0].terms == ("B",)


def test_sliced_stream_digit_cannot_hide_an_incompatible_cut():
    # the stream's A % 6 = 2 and A / 6 split A at 6; the buffer carries A % 4 only, so the
    # stream's A / 6 digit (coordinates 6, 7) cannot be projected onto the buffer's cut at 4
    with pytest.raises(TcplanError) as ei:
        seq({"A": 12}, "m![A % 4]", "m![A / 6]", "m![A % 6 = 2]")
    assert ei.value.code == "incompatible-decomposition"
    assert "gcd(6, 4) = 2" in ei.value.message
    # a compatible broadcast of the same kind is fine: A / 4 over a buffer of A % 4
    cfg = seq({"A": 12}, "m![A % 4]", "m![A / 4]", "m![A % 4 = 2]")
    assert cfg.raw_entries == [(3, 0), (2, 1)]


@pytest.mark.parametrize("size,hint", [
    (131072, "A / 65536 and A % 65536"),
    (196611, "(A # 262144) / 65536 and (A # 262144) % 65536"),  # 3 * 65537: no clean split
    (65537, "(A # 131072) / 65536 and (A # 131072) % 65536"),  # a prime
    (2**33, "three or more terms"),
])
def test_iteration_limit_hints_are_valid(size, hint):
    with pytest.raises(TcplanError) as ei:
        seq({"A": size}, "m![A]", "m![A]", "m![1]")
    fix = ei.value.violations[0].fix
    assert hint in fix
    if "three" not in hint:  # the suggested terms parse and each fits the limit
        for term in hint.split(" and "):
            assert parse(term, {"A": size}).size <= 65536
