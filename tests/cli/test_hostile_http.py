"""HTTP sources against a hostile mirror on loopback (tests/support/hostile.py: one misbehaviour
per URL path). Each test runs `corpus run --stage fetch` in a subprocess and compares the raw
cache with the documents of the object the mirror meant (read from a local copy), or expects
one line and its exit code; each shows its fault happened (the mirror's counters), and a hang
ends within the bound the test states."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.corpus import corpus_argv, environment, run_corpus, start_corpus
from support.hostile import HostileMirror, hostile_mirror
from support.waiting import wait_for
from test_remote_sources import FAST, config, fetch, local_docs, raw_docs, source_record, write_docs

OTHER = bytes.maketrans(b"abcfghjk", b"bcfghjka")  # the texts' letters, not the keys'


def versions(tmp_path: Path, mb: float = 2) -> tuple[bytes, bytes]:
    """Two versions of a JSONL object of the same size (same ids, other texts)."""
    old = write_docs(tmp_path / "versions" / "old.jsonl", mb=mb).read_bytes()
    return old, old.translate(OTHER)


def docs_of(tmp_path: Path, data: bytes) -> list[tuple[str, str]]:
    """The raw documents of `data` fetched from a local file."""
    path = tmp_path / "expected" / hashlib.sha256(data).hexdigest()[:12] / "web.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return local_docs(tmp_path, path)


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a failed fetch (its last line; no traceback before it)."""
    assert "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("corpus run: error: "), done.stderr
    return line


@pytest.fixture
def mirror() -> HostileMirror:
    with hostile_mirror() as served:
        yield served


@pytest.mark.timeout(120)
def test_a_resume_from_a_server_that_ignores_if_range_starts_again_instead_of_splicing(
    tmp_path: Path, mirror: HostileMirror
) -> None:
    old, new = versions(tmp_path)
    mirror.put("web.jsonl", old)
    mirror.cuts = [700_001]  # mid-line
    mirror.on_cut = lambda: mirror.put("web.jsonl", new)
    root = tmp_path / "data"
    done = fetch(config(tmp_path, f"{mirror.url}/ignore-if-range/web.jsonl"), root)
    assert done.returncode == 0, done.stderr
    assert mirror.cut == 1 and mirror.objects["web.jsonl"].data == new
    assert mirror.requests["GET /ignore-if-range"] >= 3  # cut, a 206 of the new object, whole
    assert "the object changed after byte 700,001" in done.stderr
    assert source_record(root)["remote"][0]["sha256"] == hashlib.sha256(new).hexdigest()
    assert raw_docs(root) == docs_of(tmp_path, new)


@pytest.mark.timeout(180)
def test_a_finished_download_left_by_a_killed_fetch_is_reused_only_for_the_same_version(
    tmp_path: Path, mirror: HostileMirror
) -> None:
    old, new = versions(tmp_path, mb=30)
    mirror.put("web.jsonl", old)
    root, cfg = tmp_path / "data", config(tmp_path, f"{mirror.url}/plain/web.jsonl")
    proc = start_corpus(
        "run", "--stage", "fetch", "--config", cfg, "--root", root, env=FAST,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip

    def downloaded() -> bool:
        found = list(root.glob("raw/.downloads/*/web.jsonl"))
        return bool(found) and found[0].stat().st_size == len(old)

    wait_for(downloaded, 120, "the finished download", every=0.005, watch=[proc])
    os.killpg(proc.pid, signal.SIGKILL)  # while it parses the download
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert not list(root.glob("raw/*/_SOURCE.json"))
    gets = mirror.requests["GET /plain"]
    mirror.put("web.jsonl", new)  # same size, another ETag
    done = fetch(cfg, root)
    assert done.returncode == 0, done.stderr
    assert mirror.requests["GET /plain"] == gets + 1  # downloaded again
    assert raw_docs(root) == docs_of(tmp_path, new)


@pytest.mark.timeout(120)
def test_a_body_without_content_length_cut_early_is_never_the_whole_file(
    tmp_path: Path, mirror: HostileMirror
) -> None:
    data, _ = versions(tmp_path)
    mirror.put("web.jsonl", data)
    expected = docs_of(tmp_path, data)
    at_line = data.index(b"\n", 600_000) + 1
    for name, cut in (("line", at_line), ("mid", at_line + 100)):
        mirror.cuts, mirror.cut = [cut], 0
        root = tmp_path / f"data-{name}"
        done = fetch(config(tmp_path, f"{mirror.url}/no-length/web.jsonl", name), root)
        assert done.returncode == 0, done.stderr
        assert mirror.cut == 1
        assert raw_docs(root) == expected  # probed past the cut: a 206 of the rest, then a 416


@pytest.mark.timeout(120)
def test_a_body_without_length_or_ranges_is_read_whole_until_two_reads_agree(
    tmp_path: Path, mirror: HostileMirror
) -> None:
    data, _ = versions(tmp_path)
    mirror.put("web.jsonl", data)
    mirror.cuts = [data.index(b"\n", 600_000) + 100]  # mid-line, once
    root = tmp_path / "data"
    done = fetch(config(tmp_path, f"{mirror.url}/no-length-no-ranges/web.jsonl"), root)
    assert done.returncode == 0, done.stderr
    assert mirror.cut == 1 and mirror.requests["GET /no-length-no-ranges"] == 3
    (warning,) = [line for line in done.stderr.splitlines() if "cannot be verified" in line]
    assert f"its size ({len(data):,} bytes, the same in two whole reads)" in warning
    assert "pin the source's sha256" in warning
    assert raw_docs(root) == docs_of(tmp_path, data)


@pytest.mark.timeout(120)
def test_an_object_that_changed_between_head_and_get_is_recorded_as_the_new_version(
    tmp_path: Path, mirror: HostileMirror
) -> None:
    old, new = versions(tmp_path)
    listed = mirror.put("web.jsonl", old)
    mirror.next_version["web.jsonl"] = new
    url = f"{mirror.url}/changes-between-head-and-get/web.jsonl"
    root, cfg = tmp_path / "data", config(tmp_path, url)
    done = fetch(cfg, root)
    assert done.returncode == 0, done.stderr
    now = mirror.objects["web.jsonl"]
    assert now.data == new and now.etag != listed.etag  # the HEAD listed the old version
    (record,) = source_record(root)["remote"]
    assert (record["etag"], record["sha256"]) == (now.etag, hashlib.sha256(new).hexdigest())
    assert raw_docs(root) == docs_of(tmp_path, new)
    again = fetch(cfg, root)
    assert again.returncode == 0, again.stderr


@pytest.mark.timeout(120)
def test_a_mirror_without_ranges_that_cuts_every_response_ends_as_transient(
    tmp_path: Path, mirror: HostileMirror
) -> None:
    data, _ = versions(tmp_path)
    mirror.put("web.jsonl", data)
    mirror.cut_every = 300_000
    started = time.monotonic()
    done = run_corpus(
        "run", "--stage", "fetch", "--root", tmp_path / "data",
        "--config", config(tmp_path, f"{mirror.url}/no-ranges-cut/web.jsonl"),
        env=FAST, timeout=90,
    )  # fmt: skip
    assert time.monotonic() - started < 60
    assert done.returncode == 75, done.stderr
    line = error_line(done)
    assert "connection broken" in line and "8 tries in a row without a new byte" in line
    # the first try gets 300,000 new bytes, the next 8 none past them
    assert mirror.requests["GET /no-ranges-cut"] == 9 and mirror.cut == 9
    assert mirror.sent == 9 * 300_000


@pytest.mark.timeout(120)
def test_a_mirror_that_drips_a_byte_at_a_time_ends_as_transient_within_its_bound(
    tmp_path: Path, mirror: HostileMirror
) -> None:
    data, _ = versions(tmp_path, mb=0.2)
    mirror.put("web.jsonl", data)
    mirror.drip_s = 0.2  # a byte every 0.2 s: never silent as long as the 1 s read timeout
    started = time.monotonic()
    done = run_corpus(
        "run", "--stage", "fetch", "--root", tmp_path / "data",
        "--config", config(tmp_path, f"{mirror.url}/drip/web.jsonl"),
        env={**FAST, "CORPUS_FETCH_TIMEOUT_S": "1"}, timeout=90,
    )  # fmt: skip
    took = time.monotonic() - started
    assert done.returncode == 75, done.stderr
    assert took < 40, took  # 8 stalled tries of about 1 s, with backoff: about 15 s
    assert "stalled" in error_line(done)
    assert 8 <= mirror.sent < 8 * 10, mirror.sent  # bytes really dripped


@pytest.mark.timeout(120)
def test_a_slow_healthy_download_keeps_the_heartbeat_alive(
    tmp_path: Path, mirror: HostileMirror
) -> None:
    from corpus_assets.resources.supervise import supervise

    data, _ = versions(tmp_path, mb=3)
    mirror.put("web.jsonl", data)
    mirror.rate = 200_000  # about 15 s for the file
    cfg = config(tmp_path, f"{mirror.url}/slow/web.jsonl")
    argv = corpus_argv("run", "--stage", "fetch", "--config", cfg, "--root", tmp_path / "data")
    lines: list[str] = []
    outcome = supervise(
        argv, environment(FAST), heartbeat_timeout_s=9, termination_timeout_s=5,
        on_stderr=lines.append,
    )  # fmt: skip
    assert outcome.returncode == 0 and not outcome.timed_out, lines
    assert outcome.seconds > 12  # slower than the heartbeat timeout: the lines kept it alive
    progress = [line for line in lines if "MB/s" in line and "/slow/web.jsonl" in line]
    assert len(progress) >= 2, lines
    assert raw_docs(tmp_path / "data") == docs_of(tmp_path, data)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("redirect-loop", "more than 10 redirects (a redirect loop?"),
        ("redirect-file", "redirects to a file URL; only http and https redirects are followed"),
        ("redirect-gopher", "redirects to a gopher URL; only http and https"),
    ],
)
def test_redirect_loops_and_redirects_to_other_schemes_are_one_line(
    tmp_path: Path, mirror: HostileMirror, path: str, words: str
) -> None:
    done = fetch(config(tmp_path, f"{mirror.url}/{path}"), tmp_path / "data")
    assert done.returncode == 65, done.stderr
    line = error_line(done)
    assert words in line and f"{mirror.url}/{path}" in line
    assert len(done.stderr.strip().splitlines()) == 1
    assert mirror.requests[f"HEAD /{path}"] == (11 if path == "redirect-loop" else 1)
    assert not list((tmp_path / "data").glob("raw/*/_SOURCE.json"))


@pytest.mark.timeout(60)
def test_a_bad_fetch_setting_in_the_environment_is_one_line_exit_64(
    tmp_path: Path, mirror: HostileMirror
) -> None:
    mirror.put("web.jsonl", versions(tmp_path, mb=0.1)[0])
    cfg = config(tmp_path, f"{mirror.url}/plain/web.jsonl")
    done = fetch(cfg, tmp_path / "data", env={"CORPUS_FETCH_TIMEOUT_S": "soon"})
    assert done.returncode == 64, done.stderr
    line = error_line(done)
    assert "CORPUS_FETCH_TIMEOUT_S='soon': must be a number of seconds" in line
