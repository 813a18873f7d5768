"""The rule registry: one definition per rule, consistent with the docs."""

import pathlib
import re

from tcplan.model import hardware as hw
from tcplan.model.rules import ENGINE_PROFILES, PROFILES, RULES, SCOPES, Violation, rules_for

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_rule_is_complete():
    for rid, r in RULES.items():
        assert r.id == rid
        assert r.kind in ("input", "hardware", "limit")
        assert r.scope in SCOPES
        assert (r.kind == "input") == (r.scope == "input")
        assert (r.kind == "limit") == (r.scope == "limits")
        assert r.message and r.fix and r.source
        assert r.profiles and set(r.profiles) <= set(PROFILES) | set(ENGINE_PROFILES)
        # an engine's rule is no sequencer's, and the other way round
        assert (r.scope == "engine") == bool(set(r.profiles) & set(ENGINE_PROFILES))


def test_rules_per_profile():
    base = {"incompatible-decomposition", "entry-limit", "iteration-limit"}
    reads = base | {"stream-outside-buffer"}
    writes = base | {"broadcast-write", "write-coverage"}
    got = lambda p, m: {r.id for r in rules_for(p, m)}  # noqa: E731
    assert got("pseudo", "read") == reads
    assert got("pseudo", "write") == writes
    tu = {"innermost-access", "tu-placement", "dm-bank-starvation"}
    # a Fetch reads a packet over 32 bytes in several reads (docs/decisions.md item 96)
    assert got("fetch", "read") == reads | tu | {"unread-axis"}
    assert got("commit", "write") == writes | tu | {"commit-align", "packet-bytes"}
    assert got("dma", "read") == reads | {"dma-packet-max"}
    assert got("dma", "write") == writes | {"dma-packet-max"}


def test_rule_ids_used_in_code_are_registered():
    used = set()
    for path in list((ROOT / "model").rglob("*.py")) + list((ROOT / "executor").glob("*.py")):
        text = path.read_text()
        used |= set(re.findall(r'fail\(\s*"([a-z-]+)"', text))
        used |= set(re.findall(r'Violation\(\s*"([a-z-]+)"', text))
        # a rule chosen by a condition (model/dma.py alignment_checks)
        for pair in re.findall(r'\("([a-z-]+)" if [^"]+ else "([a-z-]+)"\)', text):
            used |= set(pair)
    for path in list((ROOT / "planner").rglob("*.py")) + list((ROOT / "executor").glob("*.py")):
        used |= set(re.findall(r'fail\(\s*"([a-z-]+)"', path.read_text()))
    # every raised id is registered, and every registered rule is raised somewhere
    assert used == set(RULES)


def test_docs_list_every_rule():
    cli = (ROOT / "docs/cli.md").read_text()  # its rule table (the README's before issue 25)
    arch = (ROOT / "ARCHITECTURE.md").read_text()
    for rid in RULES:
        assert f"`{rid}`" in cli, rid
        assert f"`{rid}`" in arch, rid


def test_violation_renders_message_and_fix():
    v = Violation("iteration-limit", ("A",), {"entry": 0, "term": "A", "size": 131072,
                                             "hint": "split A"})
    assert "131072" in v.message and "65,536" in v.message
    assert v.fix == "split A"
    assert v.to_json()["code"] == "iteration-limit"


def test_constants_cite_the_seed():
    assert hw.MAX_SEQUENCER_ENTRIES == 8
    assert hw.MAX_ENTRY_ITERATIONS == 65_536
    assert hw.ACCESS_BYTES == (1, 2, 4, 8, 16, 32)
    assert hw.DMA_MAX_PACKET_BYTES == 4096
    src = (ROOT / "model/hardware.py").read_text()
    assert src.count("seed") >= 3 and "docs/hardware.md" in src
