"""Pictures and the HTML report (issue 17, item 5; docs/pictures.md): what the files SAY.

SVGs are written with ``svg.fonttype = 'none'``, so every label and number is a ``<text>``
element: the tests read them and hold them to the cycle breakdown's numbers."""

from __future__ import annotations

import html
import io
import json
import pathlib
import struct
import sys
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

pytest.importorskip("matplotlib")

import tcplan  # noqa: E402
from tcplan.model.cost import dma_cycles  # noqa: E402
from tcplan.model.rules import TcplanError  # noqa: E402
from tcplan.planner import plot  # noqa: E402
from tcplan.planner.cli import main  # noqa: E402
from tcplan.planner.lowering import lower_problem  # noqa: E402
from tcplan.planner.spec import load_problem  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "problems/seed"
V_HEAD_MAJOR = ROOT / "problems/planning/attention_v_head_major.yaml"
SVG = "{http://www.w3.org/2000/svg}"


def texts(svg: str) -> list[str]:
    """Every text element of an SVG, in document order."""
    return ["".join(t.itertext()).strip() for t in ET.fromstring(svg).iter(SVG + "text")]


def text_elements(svg: str) -> list[ET.Element]:
    return list(ET.fromstring(svg).iter(SVG + "text"))


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def example_4() -> dict:
    """Example 4's breakdown, from the cycle model of its lowered plan (no execution)."""
    return dma_cycles(lower_problem(load_problem(SEED / "dma_example_4.yaml"))).to_json()


@pytest.fixture(scope="module")
def example_4_hbm(example_4) -> list[str]:
    return texts(plot.svg_text(plot.hbm_figure(example_4)))


def test_the_heatmap_carries_example_4s_numbers(example_4, example_4_hbm):
    """Chip 0, 32 channels x 32 banks: 16,384 requests, 2,048 first opens and 14,336
    re-opens above each channel's column; 512, 64 and 448 in each of the 1,024 cells."""
    t = Counter(example_4_hbm)
    for label in ("HBM channel (16 x stack + channel)", "bank id", "requests per channel",
                  "first row opens per channel", "row re-opens per channel",
                  "requests per bank", "first row opens per bank", "row re-opens per bank"):
        assert t[label] >= 1, label
    assert all(t[str(c)] >= 3 for c in range(32))  # the channel numbers, on each panel
    assert (t["16,384"], t["2,048"], t["14,336"]) == (32, 32, 32)
    assert t["512"] >= 1024 and t["64"] >= 1024 and t["448"] >= 1024
    title = next(x for x in example_4_hbm if x.startswith("HBM of chip 0"))
    assert "524,288 requests on 32 of 32 channels and 32 of 32 banks" in title
    assert "65,536 first row opens, 458,752 re-opens" in title
    hot = example_4["hbm"]
    assert f"busiest channel {hot['channel']}: {hot['cycles']:,.0f} cycles" in title


@pytest.mark.parametrize("name", ["dma_example_5",
                                  pytest.param("dma_example_6", marks=pytest.mark.slow)])
def test_the_heatmap_shows_every_channels_totals(name):
    """Example 5 (16 of 32 channels: the others say '-') and Example 6 (four chips): the
    per-channel totals shown are the breakdown's, chip by chip."""
    b = dma_cycles(lower_problem(load_problem(SEED / f"{name}.yaml"))).to_json()
    shown = Counter(texts(plot.svg_text(plot.hbm_figure(b))))
    want = Counter()
    for c in b["hbm_channels"]:
        for key in ("requests", "first_opens", "reopens"):
            want[f"{c[key]:,}"] += 1
    for value, n in want.items():
        assert shown[value] >= n, value
    chips = sorted({c["chip"] for c in b["hbm_channels"]})
    assert [x for x in shown if x.startswith("HBM of chip")] == [
        x for x in shown if x.startswith("HBM of chip")]
    assert sum(x.startswith("HBM of chip") for x in shown) == len(chips)
    if name == "dma_example_5":  # the missing stack bit: 16 channels never asked
        assert shown["-"] == 3 * 16
        assert any("on 16 of 32 channels" in x for x in shown)


def test_the_timeline_names_every_engine_and_marks_the_bottleneck(example_4):
    svg = plot.svg_text(plot.timeline_figure(example_4, ("hbm", "dm")))
    t = texts(svg)
    for e in example_4["engines"]:
        c, k, p = e["engine"]
        assert f"engine chip {c}, cluster {k}, DMN pair {p}" in t
    assert t.count("66,036") == 8  # each engine's end
    assert "start-up 500 cycles per command" in t
    assert {"read (HBM)", "write (DM)", "cycles"} <= set(t)
    assert "total 584,863 cycles (bottleneck: HBM channels)" in t
    # the bottleneck, HBM channel 0 of chip 0, is the row marked in red
    red = [x for x in text_elements(svg) if "#d62728" in x.get("style", "")]
    assert "HBM chip 0, channel 0 (busiest)" in ["".join(x.itertext()).strip() for x in red]
    assert not any("".join(x.itertext()).startswith("engine") for x in red)


def test_the_timeline_shows_boundary_commands():
    """Example 6: DMN pair 3 of each cluster runs two commands, two start-ups, and is the
    bottleneck (1,192 cycles); the others end at 628."""
    b = dma_cycles(lower_problem(load_problem(SEED / "dma_example_6.yaml"))).to_json()
    svg = plot.svg_text(plot.timeline_figure(b, ("dm", "hbm"), lower_bound=1100))
    t = texts(svg)
    assert t.count("1,192 (2 commands)") == 8 and t.count("628") == 24
    assert "lower bound 1,100" in t
    red = {"".join(x.itertext()).strip() for x in text_elements(svg)
           if "#d62728" in x.get("style", "")}
    assert {f"engine chip {c}, cluster {k}, DMN pair 3" for c in range(4) for k in range(2)
            } <= red
    assert "engine chip 0, cluster 0, DMN pair 0" not in red


def test_the_dmn_load():
    """Example 5: 16 DMNs of 65,536 bytes, 512 cycles each at 128 B/cycle."""
    b = dma_cycles(lower_problem(load_problem(SEED / "dma_example_5.yaml"))).to_json()
    t = texts(plot.svg_text(plot.dmn_figure(b)))
    assert t.count("65,536 B, 512 cycles") == 16
    assert {"bytes", "cycles at 128 B/cycle"} <= set(t)
    for d in b["dmns"]:
        assert f"chip {d['chip']}, cluster {d['cluster']}, DMN {d['dmn']}" in t
    assert "DMN load: 16 DMNs, 1,048,576 bytes; busiest 512 cycles at 128 B/cycle" in t


def test_verify_plot_writes_an_svg_and_keeps_the_output(tmp_path):
    path = tmp_path / "ex5.svg"
    code, out, err = cli("verify", str(SEED / "dma_example_5.yaml"), "--plot", str(path))
    assert code == 0 and f"--plot: wrote {path}" in err
    assert out == cli("verify", str(SEED / "dma_example_5.yaml"))[1]  # the same answer
    t = texts(path.read_text())
    assert "dma_example_5: HBM -> DM, 1,866 cycles, bottleneck: HBM channels" in t
    assert "total 1,866 cycles (bottleneck: HBM channels)" in t
    assert t.count("256") >= 16  # requests per channel, on the 16 channels of one stack
    assert "DMN load: 16 DMNs, 1,048,576 bytes; busiest 512 cycles at 128 B/cycle" in t


def test_a_png_is_a_png_of_the_figures_size(tmp_path):
    path = tmp_path / "ex1.png"
    code, out, err = cli("verify", str(SEED / "dma_example_1.yaml"), "--plot", str(path),
                         "--json")
    assert code == 0 and json.loads(out)["cycles"] == 628  # --json: still one object
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    b = tcplan.verify(SEED / "dma_example_1.yaml").breakdown
    fig = plot.figure(b, ("hbm", "hbm"))
    w, h = fig.get_size_inches()
    assert (width, height) == (round(w * plot.DPI), round(h * plot.DPI))
    assert width == 1600


@pytest.fixture(scope="module")
def v_head_major():
    return tcplan.solve(V_HEAD_MAJOR)


def test_solve_report_and_plot(tmp_path, v_head_major):
    """The report of attention_v_head_major: its cycles and lower bound (2,548, at the
    bound), the chosen stream, the lowered configs, three inline SVGs, nothing external."""
    code, out, err = cli("solve", str(V_HEAD_MAJOR), "--report", str(tmp_path / "rep"),
                         "--plot", str(tmp_path / "v.svg"))
    assert code == 0 and "--report: wrote" in err and "--plot: wrote" in err
    page = (tmp_path / "rep/index.html").read_text()
    chosen = v_head_major.to_json()["plan"]["stream"]
    assert v_head_major.cycles == v_head_major.lower_bound == 2548
    assert "<b>2,548 cycles</b>, lower bound 2,548" in page
    assert "2,548 cycles against a lower bound of 2,548" in page
    assert "cycles / lower bound = <b>1.000</b>, at its lower bound" in page
    for key in ("time", "packet", "cluster", "slice"):
        assert f"<code>{html.escape(chosen[key])}</code>" in page
    lowered = tcplan.lower(V_HEAD_MAJOR).text()
    assert html.escape(lowered) in page and "packet 32 elements (64 B)" in page
    assert page.count("<svg") == 3 and page.count("</svg>") == 3
    assert "<script" not in page and "<link" not in page and " src=" not in page
    # references only inside the page: its own definitions and the heatmaps' cells, held
    # as data
    assert all(h.startswith(("#", "data:image/png;base64,")) for h in _hrefs(page))
    svg_texts = texts(page[page.index("<svg"):page.index("</svg>") + 6])
    assert "HBM channel (16 x stack + channel)" in svg_texts
    t = texts((tmp_path / "v.svg").read_text())
    assert "lower bound 2,548" in t
    assert "total 2,548 cycles (bottleneck: a DMN shared by several engines)" in t
    # the shared DMN's own row: 262,144 bytes at 128 B/cycle after one start-up
    assert "DMN 0 of chip 0, cluster 0 (busiest, shared)" in t and "2,548" in t


def _hrefs(page: str) -> list[str]:
    import re
    return re.findall(r'href="([^"]*)"', page)


def test_the_report_is_deterministic_and_escapes_the_problem(tmp_path):
    """The same plan writes the same bytes (no seconds, no dates); the problem's name and
    file name are text, not markup."""
    text = V_HEAD_MAJOR.read_text().replace("name: attention_v_head_major",
                                            "name: v<script>alert(1)</script>&")
    solved = tcplan.solve(tcplan.loads(text, "<b>odd</b>.yaml"))
    a = solved.report(tmp_path / "a").read_bytes()
    assert a == solved.report(tmp_path / "b").read_bytes()
    page = a.decode()
    assert "solve_time" not in page and "Date" not in page
    assert "<script>" not in page and "v&lt;script&gt;alert(1)&lt;/script&gt;&amp;" in page
    assert "&lt;b&gt;odd&lt;/b&gt;.yaml" in page


def test_the_api_draws(tmp_path, v_head_major):
    p = v_head_major.plot(tmp_path / "s.svg")
    assert p == tmp_path / "s.svg" and "lower bound 2,548" in texts(p.read_text())
    checked = tcplan.verify(SEED / "dma_example_1.yaml")
    p = checked.plot(tmp_path / "v.png")
    assert p.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(TcplanError) as e:
        checked.plot(tmp_path / "v.jpg")
    assert e.value.code == "bad-request" and e.value.kind == "input"


def test_a_name_is_text_not_markup_nor_math(tmp_path):
    """A problem's name goes into the picture as it is: no mathtext (``$...$``), escaped
    in the SVG."""
    name = r"a$\frac{$ and $x^2$ <b>&"
    text = (SEED / "dma_example_1.yaml").read_text().replace(
        "name: dma_example_1", "name: '" + name + "'")
    path = tcplan.verify(tcplan.loads(text, "odd.yaml")).plot(tmp_path / "odd.svg")
    assert f"{name}: HBM -> HBM, 628 cycles, bottleneck: serialized read and write" in texts(
        path.read_text())


def test_without_matplotlib_the_fix_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    path = tmp_path / "x.svg"
    code, out, err = cli("verify", str(SEED / "dma_example_1.yaml"), "--plot", str(path))
    assert code == 2 and out == "" and "Traceback" not in err
    assert "error [bad-request]: pictures need matplotlib" in err
    assert "fix: pip install 'tcplan[plot]'" in err
    assert not path.exists()
    code, out, err = cli("solve", str(V_HEAD_MAJOR), "--report", str(tmp_path / "r"),
                         "--json")
    assert code == 2 and json.loads(out)["error"]["fix"].startswith(
        "pip install 'tcplan[plot]'")
    assert not (tmp_path / "r").exists()
    with pytest.raises(TcplanError, match="matplotlib"):
        tcplan.verify(SEED / "dma_example_1.yaml").plot(path)


@pytest.mark.parametrize("name", ["x.pdf", "x", "x.svg.txt"])
def test_a_bad_suffix_is_a_bad_request(tmp_path, name):
    code, out, err = cli("verify", str(SEED / "dma_example_1.yaml"), "--plot",
                         str(tmp_path / name))
    assert code == 2 and out == ""
    assert "error [bad-request]: --plot" in err and ".svg or .png" in err
    assert "fix: name the file NAME.svg (text stays text) or NAME.png" in err


def test_other_kinds_say_what_plot_draws(tmp_path):
    code, out, err = cli("verify", str(SEED / "ve_sigmoid.yaml"), "--plot",
                         str(tmp_path / "x.svg"))
    assert code == 2 and out == ""
    assert ("--plot draws a DMA or PCIe plan's HBM load per channel and bank, its DMA "
            "engines' timeline and its DMN load; a Fetch's or Commit's DM bank accesses and "
            "cycles; or a graph's schedule and its DMA, Fetch and Commit ops' pictures; "
            "ve_sigmoid is a vector problem, which has none") in err
    code, out, err = cli("solve", str(ROOT / "problems/expressions/expr_abs_f32.yaml"),
                         "--report", str(tmp_path / "r"))
    assert code == 2 and "--report draws" in err and "expression problem" in err
    assert not (tmp_path / "r").exists()


def test_no_plan_no_picture(tmp_path):
    """An infeasible problem: solve says so as always (exit 1); the picture is skipped
    with a warning."""
    path = tmp_path / "x.svg"
    code, out, err = cli("solve", str(ROOT / "problems/infeasible/dma_dtype_mismatch.yaml"),
                         "--plot", str(path))
    assert code == 1 and "infeasible" in out
    assert "--plot: nothing written: " in err and not path.exists()


def test_a_path_that_cannot_be_written(tmp_path):
    path = tmp_path / "missing" / "x.svg"
    code, out, err = cli("verify", str(SEED / "dma_example_1.yaml"), "--plot", str(path))
    assert code == 2 and "verified" in out  # the verb answered; the picture failed
    assert "cannot write it" in err and not path.exists()
    assert not list(tmp_path.iterdir())  # no temporary file left behind


@pytest.mark.slow
def test_verify_plot_of_example_4(tmp_path):
    """The whole command on Example 4 (execution, 3,000 cell numbers, .svg and .png)."""
    for suffix in (".svg", ".png"):
        path = tmp_path / f"ex4{suffix}"
        code, out, err = cli("verify", str(SEED / "dma_example_4.yaml"), "--plot",
                             str(path))
        assert code == 0 and "584,863" in out
    t = Counter(texts((tmp_path / "ex4.svg").read_text()))
    assert (t["16,384"], t["2,048"], t["14,336"]) == (32, 32, 32)
    assert t["dma_example_4: HBM -> DM, 584,863 cycles, bottleneck: HBM channels"] == 1
    assert (tmp_path / "ex4.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_core_install_never_imports_matplotlib():
    """matplotlib is the optional extra `plot`: importing tcplan, its CLI and the picture
    modules loads none of it; only drawing does."""
    import subprocess
    code = ("import sys, tcplan; from tcplan.planner import cli, plot, report; "
            "cli.main(['verify', sys.argv[1]]); assert 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code, str(SEED / "dma_example_1.yaml")],
                   check=True, capture_output=True)
