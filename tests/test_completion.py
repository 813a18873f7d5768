"""`tcplan completion bash` (issue 17, item 7): generated from the parser, so it offers
exactly what the command line takes; run in a real bash."""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest

from tcplan.planner.cli import COMMANDS, main


def _script() -> str:
    out = io.StringIO()
    assert main(["completion", "bash"], stdout=out) == 0
    return out.getvalue()


def _complete(script: str, *words: str) -> list[str]:
    """COMPREPLY for the command line ``tcplan words...`` (the last word being typed)."""
    line = " ".join(f"'{w}'" for w in ("tcplan", *words))
    prog = (f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _tcplan\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n')
    proc = subprocess.run(["bash", "--norc", "--noprofile"], input=prog, text=True,
                          capture_output=True, check=True)
    return proc.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_completion_offers_commands_options_and_choices(tmp_path):
    script = _script()
    assert set(_complete(script, "")) >= set(COMMANDS) | {"--version", "-q", "-v"}
    assert _complete(script, "so") == ["solve"]
    assert set(_complete(script, "solve", "--")) == {
        "--help", "--json", "--verify", "--time-limit", "--workers", "--seed", "--jobs",
        "--dask", "--flat", "--plot",
        "--report", "--trace", "--emit", "--quiet", "--verbose"}
    assert _complete(script, "solve", "x.yaml", "--verify", "s") == ["sample"]
    assert _complete(script, "batch", "--verify", "") == ["full", "sample", "none"]
    assert _complete(script, "-q", "verify", "--s") == ["--seed"]


def test_every_command_has_its_options_in_the_script():
    script = _script()
    for cmd in COMMANDS:
        assert f"    {cmd}) opts=" in script
