"""One import package (issue 17, item 2): the distribution installs `tcplan` and nothing
generic beside it, so a user's own model.py or planner/ cannot shadow tcplan's parts."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_holds_one_import_package(tmp_path):
    # (built as `pip install` builds: in an isolated environment with pyproject's backend)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, cwd=tmp_path)
    wheel, = tmp_path.glob("tcplan-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"tcplan"}
    for part in ("tcplan/__init__.py", "tcplan/py.typed", "tcplan/model/mapping.py",
                 "tcplan/planner/cli.py", "tcplan/planner/kinds/dma.py",
                 "tcplan/executor/run.py"):
        assert part in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "tcplan = tcplan.planner.cli:entry_point" in \
        zipfile.ZipFile(wheel).read(entry).decode()


def test_a_users_own_model_py_does_not_shadow_tcplan(tmp_path):
    (tmp_path / "model.py").write_text("MINE = True\n")
    (tmp_path / "planner").mkdir()
    (tmp_path / "planner" / "__init__.py").write_text("MINE = True\n")
    code = ("import model, planner, tcplan, tcplan.model.mapping as m\n"
            "assert model.MINE and planner.MINE\n"
            "assert m.__name__ == 'tcplan.model.mapping'\n"
            "print(tcplan.__version__, tcplan.load)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "tcplan", "--version"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("tcplan ")


def test_the_source_imports_its_parts_through_tcplan():
    """No module imports a generic top-level name (model, planner, executor)."""
    import re
    bad = re.compile(r"^\s*(from|import)\s+(model|planner|executor)\b", re.M)
    offenders = [str(p.relative_to(ROOT)) for d in ("model", "planner", "executor", "tcplan",
                                                    "tests", "benchmarks")
                 for p in (ROOT / d).rglob("*.py") if bad.search(p.read_text())]
    assert offenders == []


def test_the_project_cites_only_its_own_docs():
    """Hardware facts are cited from docs/hardware.md, never from a file outside the
    repository (issue 17, item 6)."""
    import subprocess as sp
    files = sp.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                   check=True).stdout.split()
    outside = ("facts.md", "../shared", "shared/spec", "shared/seeds")
    hits = [f for f in files if f.endswith((".py", ".md", ".yaml", ".toml", ".txt"))
            and f != "tests/test_package.py"
            and any(o in (ROOT / f).read_text(errors="replace") for o in outside)]
    assert hits == []
