"""Bad input and bad usage: the right exit code, one clear line on stderr, nothing published."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CorpusRunner = Callable[..., subprocess.CompletedProcess[str]]
WriteConfig = Callable[[Path, Mapping[str, Any]], Path]

EOT = "<|endoftext|>"
GOOD = [{"text": f"a perfectly good document number {i}"} for i in range(3)]


def _jsonl(records: list[Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _spec(**changes: Any) -> dict[str, Any]:
    return {"name": "src", "kind": "jsonl", "path": "in.jsonl", "license": "mit", **changes}


def _config(*sources: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {
        "dataset": "bad",
        "version": "v1",
        "tokenizer": {"id": "bytes"},
        "sources": list(sources),
        **changes,
    }


def _corrupt_parquet() -> bytes:
    return b"PAR1" + b"\x00garbage" * 20 + b"PAR1"


@dataclass
class Case:
    """Input files (name -> bytes), a config, the exit code and what the message must say."""

    files: dict[str, bytes]
    config: dict[str, Any] | str
    code: int
    says: tuple[str, ...]
    suffix: str = ".json"
    env: dict[str, str] = field(default_factory=dict)


BIG_THEN_BAD = (
    _jsonl([{"text": f"document {i} " + "words " * 40} for i in range(4999)]) + b"{oops\n"
)

CASES = {
    "missing input file": Case({}, _config(_spec(path="nowhere.jsonl")), 64,
                               ("input not found", "nowhere.jsonl")),
    "glob matches nothing": Case({}, _config(_spec(path="data/*.jsonl")), 64,
                                 ("no files match", "data/*.jsonl")),
    "empty folder": Case({"d/.keep": b""}, _config(_spec(path="d")), 64, ("holds no files",)),
    "malformed JSON line": Case(
        {"in.jsonl": _jsonl(GOOD[:2]) + b'{"text": "unterminated\n' + _jsonl(GOOD)},
        _config(_spec()), 65, ("in.jsonl:3", "malformed JSON line")),
    "malformed JSON line after many good ones": Case(
        {"in.jsonl": BIG_THEN_BAD}, _config(_spec()), 65, ("in.jsonl:5000", "malformed JSON")),
    "JSON line that is not an object": Case(
        {"in.jsonl": _jsonl([*GOOD, ["a", "list"]])}, _config(_spec()), 65,
        ("in.jsonl:4", "must be an object")),
    "lone surrogate in a JSON line": Case(
        {"in.jsonl": _jsonl(GOOD) + b'{"text": "half \\ud800 a pair"}\n'}, _config(_spec()), 65,
        ("in.jsonl:4", "a lone UTF-16 surrogate (\\ud800) is not text")),
    "lone surrogate in a key of meta": Case(
        {"in.jsonl": b'{"text": "fine", "m": {"\\udfff": 1}}\n'}, _config(_spec()), 65,
        ("in.jsonl:1", "lone UTF-16 surrogate (\\udfff)")),
    "JSON nested 100,000 levels deep": Case(
        {"in.jsonl": _jsonl(GOOD) + b'{"text": "x", "meta": ' + b"[" * 100_000 + b"]" * 100_000
         + b"}\n"}, _config(_spec()), 65, ("in.jsonl:4", "nested too deeply")),
    "NaN in a JSON line": Case(
        {"in.jsonl": b'{"text": "x", "score": NaN}\n'}, _config(_spec()), 65,
        ("in.jsonl:1", "NaN is not a JSON number")),
    "Infinity in a JSON line": Case(
        {"in.jsonl": b'{"text": "x", "score": -Infinity}\n'}, _config(_spec()), 65,
        ("in.jsonl:1", "-Infinity is not a JSON number")),
    "number out of range": Case(
        {"in.jsonl": b'{"text": "x", "score": 1e999}\n'}, _config(_spec()), 65,
        ("in.jsonl:1", "1e999 is out of range")),
    "integer too long": Case(
        {"in.jsonl": b'{"text": "x", "n": ' + b"9" * 5000 + b"}\n"}, _config(_spec()), 65,
        ("in.jsonl:1", "malformed JSON line", "digits")),
    "record without the text field": Case(
        {"in.jsonl": _jsonl([{"body": "x"}])}, _config(_spec()), 65,
        ("in.jsonl:1", "no field 'text'", "body")),
    "text field that is not a string": Case(
        {"in.jsonl": _jsonl([{"text": 5}])}, _config(_spec()), 65, ("in.jsonl:1", "not a string")),
    "record without its id": Case(
        {"in.jsonl": _jsonl([{"text": "x", "id": "a"}, {"text": "y"}])},
        _config(_spec(id_field="id")), 65, ("in.jsonl:2", "id field 'id'")),
    "duplicate id": Case(
        {"in.jsonl": _jsonl([{"id": "x", "text": "a"}, {"id": "y", "text": "b"},
                             {"id": "x", "text": "c"}])},
        _config(_spec(id_field="id")), 65,
        ("in.jsonl:3: duplicate id 'x' (id_field 'id'), first at ", "in.jsonl:1", "unique")),
    "duplicate id across the files of a folder": Case(
        {"d/a.jsonl": _jsonl([{"id": 7, "text": "a"}]),
         "d/b.jsonl": _jsonl([{"id": 8, "text": "b"}, {"id": "7", "text": "c"}])},
        _config(_spec(path="d", id_field="id")), 65,
        ("b.jsonl:2: duplicate id '7'", "first at ", "a.jsonl:1")),
    "non-UTF-8 jsonl": Case(
        {"in.jsonl": _jsonl(GOOD[:1]) + b'{"text": "caf\xe9"}\n'}, _config(_spec()), 65,
        ("in.jsonl:2", "not valid UTF-8", "0xe9")),
    "non-UTF-8 text": Case(
        {"in.txt": b"fine story\n" + EOT.encode() + b"\nline two\nbad \xff byte"},
        _config(_spec(kind="text", path="in.txt", separator=EOT)), 65,
        ("in.txt:4", "not valid UTF-8", "0xff")),
    "empty jsonl": Case({"in.jsonl": b""}, _config(_spec()), 65, ("'src'", "holds no documents")),
    "jsonl of blank lines": Case(
        {"in.jsonl": b"\n  \n\n"}, _config(_spec()), 65, ("holds no documents",)),
    "text of separators only": Case(
        {"in.txt": (EOT + "\n ").encode() * 3},
        _config(_spec(kind="text", path="in.txt", separator=EOT)), 65, ("holds no documents",)),
    "corrupt parquet": Case(
        {"in.parquet": _corrupt_parquet()}, _config(_spec(kind="parquet", path="in.parquet")), 65,
        ("in.parquet", "not a readable Parquet file")),
    "sha256 pin mismatch": Case(
        {"in.jsonl": _jsonl(GOOD)}, _config(_spec(sha256="0" * 64)), 65,
        ("sha256", "0" * 64, "pins")),
    "second source missing": Case(
        {"in.jsonl": _jsonl(GOOD)}, _config(_spec(), _spec(name="other", path="gone.jsonl")), 64,
        ("'other'", "gone.jsonl")),
    "hf local file with a malformed line": Case(
        {"in.jsonl": _jsonl(GOOD) + b"{nope\n"}, _config(_spec(kind="hf")), 65,
        ("'src'", "in.jsonl")),
    "missing license": Case(
        {"in.jsonl": _jsonl(GOOD)},
        _config({k: v for k, v in _spec().items() if k != "license"}), 64,
        ("missing required key", "license")),
    "unknown source kind": Case(
        {"in.jsonl": _jsonl(GOOD)}, _config(_spec(kind="csv")), 64,
        ("unknown source kind 'csv'", "allowed: jsonl, parquet, text, hf")),
    "unknown key in a source": Case(
        {"in.jsonl": _jsonl(GOOD)}, _config(_spec(licence="mit")), 64,
        ("unknown key 'licence'", "allowed: name, kind, path, license")),
    "unknown key at the top": Case(
        {"in.jsonl": _jsonl(GOOD)}, _config(_spec(), tokeniser={"id": "x"}), 64,
        ("unknown key 'tokeniser' in the top level", "allowed: dataset, version, tokenizer")),
    "unknown key in filters": Case(
        {"in.jsonl": _jsonl(GOOD)}, _config(_spec(), filters={"dedupe": True}), 64,
        ("unknown key 'dedupe' in [filters]", "allowed: enabled, preset, min_chars")),
    "unparseable TOML": Case(
        {"in.jsonl": _jsonl(GOOD)}, 'dataset = "bad"\nversion = \n', 64,
        ("not valid TOML",), suffix=".toml"),
    "unparseable JSON": Case({}, '{"dataset": "bad",', 64, ("not valid JSON",)),
    "missing tokenizer": Case({}, {"dataset": "bad", "version": "v1"}, 64,
                              ("missing required key 'tokenizer'",)),
    "missing dataset": Case({}, {"version": "v1", "tokenizer": {"id": "b"}}, 64,
                            ("missing required key 'dataset'",)),
    "missing version": Case({}, {"dataset": "d", "tokenizer": {"id": "b"}}, 64,
                            ("missing required key 'version'",)),
}  # fmt: skip

for _bad, _why in (("../x", "it has '/'"), ("A", "uppercase"), ("a/b", "it has '/'"),
                   ("", "it is empty"), ("a" * 65, "it has 65 characters")):  # fmt: skip
    for _key in ("dataset", "version"):
        CASES[f"{_key} {_bad!r}"] = Case(
            {}, _config(**{_key: _bad}), 64, (f"{_key} is not a path-safe name: ", _why)
        )


def _error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, stderr
    return errors[0]


def _assert_nothing_published(root: Path, code: int) -> None:
    if code == 64:  # a bad config is refused before anything is touched
        assert not root.exists(), sorted(str(p) for p in root.rglob("*"))
        return
    raw = root / "raw"
    if not raw.exists():
        return
    assert [p.name for p in raw.iterdir() if not p.name.startswith(".")] in ([], ["LEDGER.jsonl"])
    ledger = raw / "LEDGER.jsonl"
    assert not ledger.exists() or ledger.read_text() == ""
    staging = raw / ".staging"
    assert not staging.exists() or list(staging.iterdir()) == []


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_bad_input_fails_clearly_and_publishes_nothing(
    case: Case, tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    for name, data in case.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    cfg = tmp_path / f"corpus{case.suffix}"
    if isinstance(case.config, str):
        cfg.write_text(case.config)
    else:
        write_config(cfg, case.config)
    root = tmp_path / "root"
    out = corpus("run", "--stage", "fetch", "--config", cfg, "--root", root, env=case.env)
    assert out.returncode == case.code, out.stderr
    line = _error_line(out.stderr)
    assert line.startswith("corpus run: error: ")
    for fragment in case.says:
        assert fragment in line, line
    assert out.stdout == ""
    _assert_nothing_published(root, case.code)


def test_config_file_missing(tmp_path: Path, corpus: CorpusRunner) -> None:
    out = corpus(
        "run", "--stage", "fetch", "--config", tmp_path / "absent.toml", "--root", tmp_path / "r"
    )
    assert out.returncode == 64
    assert "config file not found" in _error_line(out.stderr)
    assert "absent.toml" in out.stderr
    assert not (tmp_path / "r").exists()


def test_a_bad_config_is_refused_by_every_command(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    cfg = write_config(tmp_path / "c.json", _config(_spec(), dataset="../escape"))
    for args in (("hash", cfg), ("cleanup", "--config", cfg, "--root", tmp_path / "r")):
        out = corpus(*args)
        assert out.returncode == 64, out.stderr
        assert "dataset is not a path-safe name: it has '/'" in _error_line(out.stderr)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("run", "--config", "c.toml"), "--stage"),
        (("run", "--stage", "fetch"), "--config"),
        (("run", "--stage", "frobnicate", "--config", "c.toml"), "invalid choice"),
        (("run", "--stage", "fetch", "--config", "c.toml", "--workers", "0"), "--workers"),
        (("run", "--stage", "fetch", "--config", "c.toml", "--workers", "x"), "--workers"),
        (("frobnicate",), "invalid choice"),
        ((), "COMMAND"),
        (("hash",), "file"),
        (("verify",), "path"),
        (("cleanup",), "--config"),
    ],
)
def test_bad_usage_exits_64(
    args: tuple[str, ...],
    says: str,
    tmp_path: Path,
    corpus: CorpusRunner,
    write_config: WriteConfig,
) -> None:
    write_config(tmp_path / "c.toml", _config())
    out = corpus(*args, cwd=tmp_path)
    assert out.returncode == 64, out.stderr
    assert says in out.stderr
    assert out.stdout == ""
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "corpus-data").exists()


@pytest.mark.parametrize(
    "args", [(), ("hash",), ("run",), ("cleanup",), ("verify",)], ids=lambda a: " ".join(a) or "-"
)
def test_help_for_every_command(args: tuple[str, ...], corpus: CorpusRunner) -> None:
    out = corpus(*args, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: corpus")


def test_verify_of_a_missing_path(tmp_path: Path, corpus: CorpusRunner) -> None:
    out = corpus("verify", tmp_path / "nothing-here")
    assert out.returncode in (64, 65)
    assert "nothing-here" in out.stderr
    assert "Traceback" not in out.stderr


def test_parquet_without_the_text_column(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    pq.write_table(pa.table({"body": ["x", "y"]}), tmp_path / "in.parquet")
    cfg = write_config(tmp_path / "c.json", _config(_spec(kind="parquet", path="in.parquet")))
    out = corpus("run", "--stage", "fetch", "--config", cfg, "--root", tmp_path / "root")
    assert out.returncode == 65
    line = _error_line(out.stderr)
    assert "no column 'text'" in line
    assert "columns: body" in line
    _assert_nothing_published(tmp_path / "root", 65)


def test_duplicate_id_in_parquet(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    ids = [f"doc-{i}" for i in range(5000)] + ["doc-17"]
    pq.write_table(pa.table({"id": ids, "text": ids}), tmp_path / "in.parquet")
    spec = _spec(kind="parquet", path="in.parquet", id_field="id")
    cfg = write_config(tmp_path / "c.json", _config(spec))
    out = corpus("run", "--stage", "fetch", "--config", cfg, "--root", tmp_path / "root")
    assert out.returncode == 65, out.stderr
    line = _error_line(out.stderr)
    assert "in.parquet: row 5001: duplicate id 'doc-17'" in line
    assert "first at " in line and "in.parquet: row 18" in line
    _assert_nothing_published(tmp_path / "root", 65)


@pytest.mark.parametrize("path", ["d", "d/**/*.txt", "d/*"])
def test_a_link_out_of_the_source_folder_is_refused(
    path: str, tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("root:$6$not-for-the-corpus:19000:0:99999:7:::\n")
    folder = tmp_path / "d"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("a perfectly good story about a cat and a dog\n")
    (folder / "zz.txt").symlink_to(secret)
    (folder / "sub" / "inside.txt").symlink_to(folder / "a.txt")  # a link inside is fine
    cfg = write_config(tmp_path / "c.json", _config(_spec(kind="text", path=path)))
    out = corpus("run", "--stage", "fetch", "--config", cfg, "--root", tmp_path / "root")
    assert out.returncode == 65, out.stderr
    line = _error_line(out.stderr)
    assert f"{folder / 'zz.txt'} is a symbolic link out of {folder}" in line
    assert str(secret) in line
    _assert_nothing_published(tmp_path / "root", 65)

    (folder / "zz.txt").unlink()  # without it the folder builds, the inner link included
    out = corpus("run", "--stage", "fetch", "--config", cfg, "--root", tmp_path / "root")
    assert out.returncode == 0, out.stderr
    (record,) = (tmp_path / "root" / "raw").glob("*/_SOURCE.json")
    files = [i["name"] for i in json.loads(record.read_text())["inputs"]]
    assert "zz.txt" not in files and len(files) == (2 if path != "d/*" else 1)


def test_a_linked_folder_out_of_the_glob_is_refused(
    tmp_path: Path, corpus: CorpusRunner, write_config: WriteConfig
) -> None:
    """A glob's `**` descends into a linked folder; its files are outside the source folder."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "private.txt").write_text("someone else's notes, not for the corpus\n")
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.txt").write_text("a perfectly good story about a cat and a dog\n")
    (folder / "more").symlink_to(elsewhere, target_is_directory=True)
    cfg = write_config(tmp_path / "c.json", _config(_spec(kind="text", path="d/**/*.txt")))
    out = corpus("run", "--stage", "fetch", "--config", cfg, "--root", tmp_path / "root")
    assert out.returncode == 65, out.stderr
    line = _error_line(out.stderr)
    assert f"{folder / 'more' / 'private.txt'} is a symbolic link out of {folder}" in line
    _assert_nothing_published(tmp_path / "root", 65)
