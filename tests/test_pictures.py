"""Pictures of a graph's ops and of a Fetch or a Commit, and pictures legible at report size
(issue 31, item 5; docs/pictures.md; docs/decisions.md item 117).

What the pictures say is read from their SVG text (``svg.fonttype = 'none'``); where they
sit is measured with matplotlib's own renderer after the layout the file gets."""

from __future__ import annotations

import io
import json
import pathlib
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("matplotlib")

import tcplan  # noqa: E402
from tcplan.model.cost import dma_cycles  # noqa: E402
from tcplan.planner import heatmap, plot, tu_plot  # noqa: E402
from tcplan.planner.cli import main  # noqa: E402
from tcplan.planner.lowering import lower_problem  # noqa: E402
from tcplan.planner.spec import load_problem  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "problems/seed"
OVERLAP = ROOT / "problems/graphs/schedule_overlap.yaml"
SVG = "{http://www.w3.org/2000/svg}"

#: f32 rows of 128 bytes fetched down their columns: accesses of 8 B, 128 B apart, so each
#: column of 32 rows stays on one DM bank (32 accesses in a row), then the next 8 bytes
COLUMNS = """format: 1
name: fetch_columns
kind: fetch
dtype: f32
axes: {R: 32, C: 32}
source: {tier: dm, slice: 'm![1 # 256]', element: 'm![R, C]'}
stream: {time: 'm![C / 2, R]', packet: 'm![C % 2]'}
"""


def texts(svg: str) -> list[str]:
    return ["".join(t.itertext()).strip() for t in ET.fromstring(svg).iter(SVG + "text")]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# ---- a graph's ops ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def overlap(tmp_path_factory):
    """schedule_overlap solved and drawn: (its --json answer, the folder, standard error)."""
    folder = tmp_path_factory.mktemp("overlap")
    code, out, err = cli("solve", str(OVERLAP), "--verify", "none", "--json", "--plot",
                         str(folder / "g.svg"))
    assert code == 0
    return json.loads(out), folder, err


def test_a_graph_draws_each_dma_fetch_and_commit_op_beside_its_schedule(overlap):
    """Two DMAs, two Fetches and a Commit get a file each beside the schedule's; the
    collect, the TRF store and the contraction (kinds with no pictures) none."""
    answer, folder, err = overlap
    ops = {o["op"]: o for o in answer["plan"]["ops"]}
    drawn = ["load_w", "store_z", "fetch_w", "fetch_x", "commit_y"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["g.svg"] + [f"g.{op}.svg" for op in drawn])
    for op in drawn:
        assert f"--plot: wrote {folder / f'g.{op}.svg'}" in err
    assert f"--plot: wrote {folder / 'g.svg'}" in err
    assert {ops[op]["kind"] for op in drawn} == {"dma", "fetch", "commit"}
    for op in drawn:  # each headed by the graph, the op and the op's own cycles
        t = texts((folder / f"g.{op}.svg").read_text())
        head = f"schedule_overlap, op {op}: "
        title = next(x for x in t if x.startswith(head))
        assert f"{ops[op]['cycles']:,} cycles" in title, title


def test_a_graph_ops_pictures_are_its_kinds_own(overlap):
    """A DMA op's picture is the single problem's three (its breakdown's numbers), a
    Fetch op's the Fetch problem's two, with the op's lower bound marked."""
    answer, folder, _ = overlap
    ops = {o["op"]: o for o in answer["plan"]["ops"]}
    plan = tcplan.lower(OVERLAP).plan  # (the same joint choice: one optimum)
    rows = {r.problem.name: r for r in plan.ops}
    b = dma_cycles(rows["load_w"].plan).to_json()
    alone = texts(plot.svg_text(plot.figure(b, ("hbm", "dm"), "HEAD", ops["load_w"][
        "lower_bound"])))
    drawn = texts((folder / "g.load_w.svg").read_text())
    head = "schedule_overlap, op load_w: HBM -> DM, 540 cycles, bottleneck: HBM channels"
    assert [x.replace(head, "HEAD") for x in drawn] == alone  # the same, but the heading
    assert f"lower bound {ops['load_w']['lower_bound']:,}" in drawn
    t = texts((folder / "g.fetch_w.svg").read_text())
    assert "Fetch, each of 4 slice(s) (sub context)" in t
    assert f"lower bound {ops['fetch_w']['lower_bound']:,} (accesses of 8 B)" in t
    assert any(x.startswith("Fetch's cycles: 64 in every slice at once") for x in t)


def test_an_ops_file_name_is_kept_to_plain_characters():
    taken: set[pathlib.Path] = set()
    g = pathlib.Path("/out/g.png")
    assert plot.op_path(g, "load w/1", taken) == pathlib.Path("/out/g.load_w_1.png")
    assert plot.op_path(g, "load_w_1", taken) == pathlib.Path("/out/g.load_w_1-2.png")
    assert plot.op_path(g, "..", taken) == pathlib.Path("/out/g.__.png")
    assert plot.op_path(g, "", taken) == pathlib.Path("/out/g.op.png")


def test_the_api_draws_a_graph(tmp_path):
    """``SolveResult.plot`` draws a graph as ``--plot`` does (it used to be refused)."""
    path = tcplan.solve(OVERLAP, verify="none").plot(tmp_path / "g.png")
    assert path == tmp_path / "g.png" and path.read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "g.commit_y.png").read_bytes()[:4] == b"\x89PNG"


def test_a_contraction_with_its_moves_draws_its_graph(tmp_path):
    """A contraction planned with its moves is drawn as its chosen graph: the schedule and
    its Fetches' and Commit's pictures (before, nothing was written)."""
    solved = tcplan.solve(ROOT / "problems/contractions/attention_qk_kernel_layouts.yaml",
                          verify="none")
    solved.plot(tmp_path / "c.svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "c.commit_result.svg", "c.fetch_source.svg", "c.fetch_trf.svg", "c.svg"]
    t = texts((tmp_path / "c.svg").read_text())
    assert any(x.startswith("attention_qk_kernel_layouts: makespan") for x in t)


# ---- a Fetch or a Commit -----------------------------------------------------------------------
def test_a_fetch_draws_its_banks_from_its_own_walk(tmp_path):
    """The heatmap's accesses are the Fetch's: access i reads row i % 32 of column pair
    i // 32, at (i % 32) x 128 + (i // 32) x 8 bytes; 32 in a row on bank 0, then bank 1."""
    problem = tcplan.loads(COLUMNS, "fetch_columns.yaml")
    d = tu_plot.picture_data(tcplan.lower(problem).plan)
    assert d["walk"] == [[i % 32 * 128 + i // 32 * 8, 8] for i in range(64)]
    assert d["accesses"] == d["cycles"] == 512 and d["longest_bank_run"] == 32
    grid = tu_plot.bank_grid(d["walk"])
    assert grid[0] == [8] * 32 + [0] * 32 and grid[1] == [0] * 32 + [8] * 32
    assert tu_plot.longest_run(grid) == (0, 0, 32)
    code, out, err = cli("verify", str(_write(tmp_path, COLUMNS)), "--plot",
                         str(tmp_path / "f.svg"))
    assert code == 0 and "--plot: wrote" in err
    t = texts((tmp_path / "f.svg").read_text())
    assert "fetch_columns: Fetch, DM -> stream (main context), 512 cycles" in t
    title = next(x for x in t if x.startswith("Fetch's DM banks in each slice"))
    assert "the first 64 of its 512 accesses of 8 B" in title
    assert "the longest run on one bank in view 32 (outlined in red)" in title
    assert "in the whole walk 32 (at most 63)" in title
    assert t.count("8") >= 64  # a number in each used cell
    assert "512 (512 packet(s) x 1 access(es) of 8 B)" in t


def _write(folder: pathlib.Path, text: str) -> pathlib.Path:
    path = folder / "problem.yaml"
    path.write_text(text)
    return path


def test_a_solved_fetch_marks_its_lower_bound(tmp_path):
    solved = tcplan.solve(ROOT / "problems/planning/fetch_q_free_stream.yaml")
    t = texts(solved.plot(tmp_path / "q.svg").read_text())
    assert f"lower bound {solved.lower_bound:,} (accesses of 32 B)" in t
    assert "Fetch, each of 64 slice(s) (main context)" in t


def test_report_of_a_fetch_says_to_draw_it(tmp_path):
    code, out, err = cli("solve", str(ROOT / "problems/planning/fetch_q_free_stream.yaml"),
                         "--report", str(tmp_path / "r"))
    assert code == 2 and out == "" and "fix: draw it with --plot FILE" in err
    assert not (tmp_path / "r").exists()


# ---- legends clear of the titles -------------------------------------------------------------
def _figures(fig):
    yield fig
    for sub in fig.subfigs:
        yield from _figures(sub)


def _titles(fig, renderer) -> list:
    """Every title's box: the figure's and subfigures' headings, each axes' three titles."""
    out = []
    for f in _figures(fig):
        if f._suptitle is not None and f._suptitle.get_text():
            out.append(f._suptitle)
    for ax in fig.get_axes():
        out += [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
    return [t.get_window_extent(renderer) for t in out]


def overlaps(fig) -> list[str]:
    """Where a legend overlaps a title or an axes (its frame, ticks, labels), once laid out
    as the file will be."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    legends = [leg for f in _figures(fig) for leg in f.legends]
    legends += [ax.legend_ for ax in fig.get_axes() if ax.legend_ is not None]
    assert legends, "no legend to check"
    found = []
    for leg in legends:
        box = leg.get_window_extent(renderer)
        found += [f"title {t}" for t in _titles(fig, renderer) if box.overlaps(t)]
        found += [f"axes {ax.get_title(loc='left')!r}" for ax in fig.get_axes()
                  if ax.legend_ is not leg and box.overlaps(ax.get_tightbbox(renderer))]
    return found


@pytest.fixture(scope="module")
def example_6() -> dict:
    return dma_cycles(lower_problem(load_problem(SEED / "dma_example_6.yaml"))).to_json()


@pytest.fixture(scope="module")
def v_head_major() -> dict:
    b = tcplan.solve(ROOT / "problems/planning/attention_v_head_major.yaml").breakdown
    assert b is not None
    return b


def test_the_timeline_legend_is_clear_of_every_title(example_6, v_head_major):
    """The engines' timeline, alone and in the three pictures, with a long title, and the
    Fetch's: each legend below its axes, on no title and no axes."""
    long = "a problem with a long name " * 5
    for fig in (plot.timeline_figure(example_6, ("dm", "hbm"), long, 1100),
                plot.figure(v_head_major, ("hbm", "dm"), long, 2548),
                plot.tu_figure(_columns_data(), long, 400)):
        assert overlaps(fig) == []


def test_the_legend_check_sees_an_overlap(v_head_major):
    """The check can fail: the legend where it used to be, above the axes' right end
    beside the left-hand title, overlaps that title."""
    fig = plot.timeline_figure(v_head_major, ("hbm", "dm"))
    fig.legends.clear()
    ax = next(ax for ax in fig.get_axes() if ax.get_title(loc="left").startswith("DMA"))
    ax.legend(handles=_patches(), loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=5,
              fontsize=7, frameon=False)
    assert any(w.startswith("title") for w in overlaps(fig))


def _patches():
    from matplotlib.patches import Patch
    return [Patch(color=c, label=f"a legend entry of some length {k}")
            for k, c in enumerate(("red", "green", "blue", "grey", "purple"))]


def _columns_data() -> dict:
    return tu_plot.picture_data(tcplan.lower(tcplan.loads(COLUMNS, "c.yaml")).plan)


# ---- heatmap numbers readable at the report's width, or left out ------------------------------
def _heatmaps(fig):
    """The heatmap axes (an image each; the colour bars are meshes) and their numbers."""
    return [(ax, [t for t in ax.texts if t.get_text()]) for ax in fig.get_axes() if ax.images]


def _rendered(fig, text, renderer) -> tuple[float, float, float, float, float]:
    """At the report's width: the number's font size, its width and height, its cell's
    width and height (CSS pixels)."""
    scale = heatmap.REPORT_PX / (fig.get_figwidth() * fig.dpi)
    x, y = text.get_position()
    (x0, y0), (x1, y1) = text.axes.transData.transform([(x - 0.5, y - 0.5),
                                                        (x + 0.5, y + 0.5)])
    box = text.get_window_extent(renderer)
    return (text.get_fontsize() * fig.dpi / 72 * scale, box.width * scale,
            box.height * scale, abs(x1 - x0) * scale, abs(y1 - y0) * scale)


def _readable(fig) -> int:
    """Every number in every heatmap is at least 9 px tall and inside its cell at 1,400 px:
    how many were measured."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    n = 0
    for ax, numbers in _heatmaps(fig):
        for t in numbers:
            font, w, h, cw, ch = _rendered(fig, t, renderer)
            assert font >= heatmap.MIN_FONT_PX and w <= cw - 2 * heatmap.PAD_PX and h <= ch, (
                t.get_text(), font, w, cw, h, ch)
            n += 1
    return n


def test_heatmap_numbers_are_readable_at_the_reports_width(v_head_major):
    """The HBM heatmaps (32 channels of 8 banks) and a Fetch's banks keep their numbers,
    each 9 px tall or more and inside its cell when the picture is 1,400 px wide."""
    fig = plot.hbm_figure(v_head_major)
    assert _readable(fig) == 3 * 8 * 32
    fig = plot.tu_figure(_columns_data())
    assert _readable(fig) == 64
    assert heatmap.cell_font(fig) * plot.DPI / 72 * heatmap.REPORT_PX / 1600 >= 9


def test_numbers_too_long_for_their_cells_are_left_out(v_head_major):
    """Requests a million times as many: '32,000,000' cannot fit a cell 1/32 of the width
    at 9 px (measured), so that panel keeps its colours and its colour bar and says why;
    the other two keep their numbers."""
    b = json.loads(json.dumps(v_head_major))
    for r in b["hbm_banks"]:
        r["requests"] = [v * 1_000_000 for v in r["requests"]]
    fig = plot.hbm_figure(b)
    maps = _heatmaps(fig)
    assert [len(numbers) for _, numbers in maps] == [0, 8 * 32, 8 * 32]
    assert "numbers left out: at 1,400 px wide they do not fit the cells" in maps[0][0].get_title(
        loc="left")
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.get_axes()) == 3
    # measured: the number would not fit its cell at the readable size
    ax = maps[0][0]
    probe = ax.text(0, 0, "32,000,000", fontsize=heatmap.cell_font(fig), ha="center",
                    va="center")
    fig.draw_without_rendering()
    _, w, _, cw, _ = _rendered(fig, probe, fig.canvas.get_renderer())
    assert w > cw - 2 * heatmap.PAD_PX
    probe.remove()
    assert _readable(fig) == 2 * 8 * 32  # (what is left is readable)


def test_the_report_shows_pictures_at_the_width_they_are_drawn_for(tmp_path):
    """The report's page is 1,400 px wide and its pictures wider than that at their own
    size, so they are shown 1,400 px wide: the width the numbers were fitted to."""
    page = tcplan.solve(ROOT / "problems/planning/attention_v_head_major.yaml").report(
        tmp_path / "r").read_text()
    assert f"max-width: {heatmap.REPORT_PX}px" in page
    svg = ET.fromstring(page[page.index("<svg"):page.index("</svg>") + 6])
    assert float(svg.get("width").removesuffix("pt")) * 4 / 3 >= heatmap.REPORT_PX
