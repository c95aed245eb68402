"""docs/training.md, "The hand-off end to end", run as written on a fresh data root: its shell
block (two `corpus build`s and `corpus mix`) and its Python block, and what the text says they
print."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "training.md"
LINKED = (".venv", "examples", "data")
SECTION = "## The hand-off end to end"


def blocks(text: str) -> dict[str, list[str]]:
    """The fenced blocks of the section, by language."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found: dict[str, list[str]] = {}
    for lang, body in re.findall(r"^```(\w+)\n(.*?)^```$", section, flags=re.S | re.M):
        found.setdefault(lang, []).append(body)
    return found


def run(work: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"CORPUS_ROOT", "DAGSTER_HOME"}}
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        argv, cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stderr[-3000:]}"
    return done


def test_the_hand_off_runs_as_written(tmp_path: Path) -> None:
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name)
    text = PAGE.read_text(encoding="utf-8")
    found = blocks(text)
    (commands,), (script,) = found["sh"], found["python"]
    outputs = [run(tmp_path, ["bash", "-c", line]) for line in commands.splitlines() if line]
    assert len(outputs) == 3
    mixed = json.loads(outputs[-1].stdout)
    assert mixed["partition_key"] == "stories-plays-90d15c072c95"
    assert f"partition key `{mixed['partition_key']}`" in text
    stories, plays = mixed["components"]["stories"], mixed["components"]["plays"]
    assert mixed["train"]["samples"] == 15_423 and mixed["validation"]["samples"] == 139
    assert (stories["samples"], stories["share"], stories["epochs"]) == (10_796, 0.699994, 1.0)
    assert (plays["samples"], plays["share"]) == (4_627, 0.300006)
    assert mixed["validation"]["documents"] == 21
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    printed = run(tmp_path, [".venv/bin/python", "train.py"]).stdout.splitlines()
    assert printed[0] == "8003 plays"
    assert "'sample': 8024" in printed[1]
    assert "It prints `8003 plays`" in text and "`'sample': 8024`" in text


def test_the_config_shown_is_the_example_config() -> None:
    text = PAGE.read_text(encoding="utf-8").split("## Mixtures", 1)[1]
    shown = re.search(r"^```toml\n(.*?)^```$", text, flags=re.S | re.M)
    assert shown is not None
    example = REPO / "examples" / "mixture" / "stories-plays.toml"
    assert tomllib.loads(shown.group(1)) == tomllib.loads(example.read_text(encoding="utf-8"))
