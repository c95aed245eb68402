"""The pre-flight check in-process: every problem a build would hit later, named, nothing written.

The Hugging Face Hub path (a cached id, an uncached one under HF_HUB_OFFLINE) is tested through
the CLI in tests/cli/test_preflight_cli.py, where HF_HOME is set before the hub client loads.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from corpus_assets.core.config import LoadedConfig, load_config
from corpus_assets.core.errors import ConfigError
from corpus_assets.core.stages.preflight import preflight

HAND = {"version": "v1", "dataset": "tinystories", "tokenizer": {"id": "bytes"}}
HAND_SHA256 = "a03711ec959b2a8fb6cf51d9445bee90fcb69a103cfa033483b52f836269c0a6"


def word_tokenizer(path: Path, specials: tuple[str, ...] = ("<unk>", "</s>")) -> Path:
    """A small real WordLevel `tokenizer.json` (EOS `</s>` unless `specials` leaves it out)."""
    vocab = {s: i for i, s in enumerate(specials)}
    vocab.update({f"w{i}": len(specials) + i for i in range(20)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token=specials[0]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # type: ignore[assignment]
    tok.add_special_tokens(list(specials))
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def source(**changes: Any) -> dict[str, Any]:
    return {"name": "s", "kind": "jsonl", "path": "in.jsonl", "license": "mit", **changes}


def config(folder: Path, raw: dict[str, Any]) -> LoadedConfig:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "c.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return load_config(path)


def with_sources(*sources: dict[str, Any], **tokenizer: Any) -> dict[str, Any]:
    return {**HAND, "tokenizer": tokenizer or {"id": "bytes"}, "sources": list(sources)}


def refused(cfg: LoadedConfig) -> str:
    with pytest.raises(ConfigError) as caught:
        preflight(cfg)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_hand_example_has_no_sources_and_keeps_its_hash(tmp_path: Path) -> None:
    cfg = config(tmp_path, HAND)
    assert cfg.sha256 == HAND_SHA256
    message = refused(cfg)
    assert message.startswith("config has no sources; add a [[sources]] table")
    assert "jsonl, parquet, text, hf" in message


def test_a_good_config_passes_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("a story")
    word_tokenizer(tmp_path / "tok" / "tokenizer.json")
    sources = (source(), source(name="t", kind="text", path="d"), source(name="g", path="*.jsonl"))
    cfg = config(tmp_path, with_sources(*sources, id="wl", path="tok/tokenizer.json"))
    before = sorted(tmp_path.rglob("*"))
    preflight(cfg)
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize(
    ("spec", "files", "says"),
    [
        (source(path="nowhere.jsonl"), [], "input not found: {tmp}/nowhere.jsonl"),
        (source(path="data/*.jsonl"), ["data/a.json"], "no files match 'data/*.jsonl'"),
        (source(path="d"), ["d/.hidden"], "folder {tmp}/d holds no files"),
        (source(kind="hf", path="./gone/train.jsonl"), [], "input not found: {tmp}/gone"),
        (source(kind="hf", path="/nonexistent/x.parquet"), [], "input not found: /nonexistent"),
    ],
    ids=["file", "glob", "empty folder", "hf relative file", "hf absolute file"],
)
def test_a_source_path_that_matches_no_file(
    tmp_path: Path, spec: dict[str, Any], files: list[str], says: str
) -> None:
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    message = refused(config(tmp_path, with_sources(spec)))
    assert message.startswith("source 's': ")
    assert says.format(tmp=tmp_path) in message


PREFLIGHT_ONLINE = """
import sys
from corpus_assets.core.config import load_config
from corpus_assets.core.stages.preflight import preflight
preflight(load_config(sys.argv[1]))
"""


def test_an_hf_hub_dataset_id_is_not_looked_up(tmp_path: Path) -> None:
    """Hub datasets are the fetch stage's business (network); only local paths are checked.
    Online, with the hub at a local socket that counts its connections: none arrives."""
    cfg = tmp_path / "hub.json"
    raw = with_sources(source(kind="hf", path="org/some-dataset"))
    cfg.write_text(json.dumps(raw), encoding="utf-8")
    with socket.socket() as hub:
        hub.bind(("127.0.0.1", 0))
        hub.listen(8)
        hub.settimeout(0.5)
        env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0"}
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{hub.getsockname()[1]}"
        env["HF_HOME"] = str(tmp_path / "hf-home")
        done = subprocess.run(
            [sys.executable, "-c", PREFLIGHT_ONLINE, str(cfg)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        with pytest.raises(TimeoutError):  # no connection waits to be accepted
            hub.accept()


@pytest.mark.parametrize(
    ("tokenizer", "make", "says"),
    [
        ({"path": "missing/tokenizer.json"}, None, "file not found: {tmp}/missing/tokenizer.json"),
        ({"path": "tok"}, "folder", "{tmp}/tok is a folder, not a tokenizer.json"),
        ({"path": "tok.json"}, "text", "{tmp}/tok.json is not a valid tokenizer.json"),
        ({"path": "tok.json"}, "no eos", "no end-of-text token found"),
    ],
    ids=["missing", "folder", "not a tokenizer", "no end-of-text token"],
)
def test_a_tokenizer_that_does_not_load(
    tmp_path: Path, tokenizer: dict[str, str], make: str | None, says: str
) -> None:
    (tmp_path / "in.jsonl").write_text('{"text": "x"}\n')
    if make == "folder":
        (tmp_path / "tok").mkdir()
    elif make == "text":
        (tmp_path / "tok.json").write_text("this is not JSON\nat all\n")
    elif make == "no eos":
        word_tokenizer(tmp_path / "tok.json", specials=("<unk>",))
    message = refused(config(tmp_path, with_sources(source(), id="mine", **tokenizer)))
    assert message.startswith("tokenizer 'mine': ")
    assert says.format(tmp=tmp_path) in message


@pytest.mark.parametrize("repo_id", ["a..b", "org/name/extra", "name-"])
def test_a_malformed_hub_id(tmp_path: Path, repo_id: str) -> None:
    (tmp_path / "in.jsonl").write_text('{"text": "x"}\n')
    message = refused(config(tmp_path, with_sources(source(), id=repo_id)))
    assert f"tokenizer {repo_id!r} is not a Hugging Face Hub repo id" in message


def test_every_problem_is_named_in_one_line(tmp_path: Path) -> None:
    sources = (source(path="a.jsonl"), source(name="t", path="b/*.txt"))
    message = refused(config(tmp_path, with_sources(*sources, id="x", path="t.json")))
    parts = message.split("; ")
    assert [p.split(":")[0] for p in parts] == ["source 's'", "source 't'", "tokenizer 'x'"]
