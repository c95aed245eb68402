"""Run datatrove's equivalent of our shard stage on a benchmark corpus; time and score it.

    python bench/bench_datatrove.py --data bench/out/shard/corpus-5mb [--work DIR] [--workers 2]

bench_shard.py calls `run_datatrove(data_dir, work_dir, workers)` after timing our shard stage
(when datatrove is importable) and prints both side by side.

The chain, step for step against ours (`corpus run --stage shard`)
    ours                               datatrove (0.10)
    read the raw cache                 JsonlReader over part-*.jsonl (text_key "text", id_key "id")
    quality filters                    GopherQualityFilter -> GopherRepetitionFilter; thresholds
                                       that exist in both set to our defaults (min 10 / max 200k
                                       words, mean word length 2.5-10, symbol/word 0.1, >= 80%
                                       alphabetic words, duplicate lines 0.5 / their chars 0.3);
                                       datatrove's other Gopher checks (stop words, bullets,
                                       ellipses, duplicate paragraphs, top and duplicate n-grams)
                                       keep their defaults
    exact dedup on NFC text with       ExactDedupSignature -> ExactFindDedups -> ExactDedupFilter
    whitespace collapsed               with the same key (NFC, whitespace collapsed), 64-bit xxhash
    MinHash-LSH near dedup, 5-grams,   MinhashDedupSignature -> MinhashDedupBuckets ->
    20 bands x 6, Jaccard confirmed    MinhashDedupCluster -> MinhashDedupFilter, 5-grams,
                                       14 buckets x 8 hashes (datatrove's default), no confirmation
    PII: emails, IPs, phones ->        PIIFormatter: emails and *public* IPv4 only, replaced by
    typed placeholders                 example addresses; datatrove has no phone scrubber
    Parquet shards + manifest          ParquetWriter (one file per task), no manifest

Datatrove materializes the input of every dedup stage, so the chain runs as six executors, one
after the other, all with `LocalPipelineExecutor(workers=N, start_method="fork")` and logging
under the work dir:

    1. N tasks   read -> quality -> repetition -> JsonlWriter(filtered/) -> ExactDedupSignature
    2. 1 task    ExactFindDedups (datatrove runs it on one task per finder bucket; we use one)
    3. N tasks   read filtered/ -> ExactDedupFilter -> JsonlWriter(exact/) -> MinhashDedupSignature
    4. 14 tasks  MinhashDedupBuckets (datatrove needs tasks to be a multiple of the buckets)
    5. 1 task    MinhashDedupCluster (datatrove requires a single task)
    6. N tasks   read exact/ -> MinhashDedupFilter -> PIIFormatter -> ParquetWriter(output/)

Intermediate JSONL is uncompressed (datatrove's default is gzip, which would cost it more).

Which copy is kept: our scoring (truth_score.score, the truth of make_corpus.py) expects the
first occurrence of a duplicate to be kept, as our stage does. Datatrove keeps one member of
each group, preferring lower (task, index in task) and, for exact dedup, ignoring the task; its
reader gives task r the files r, r + N, ... So that "first" means the same thing, the reader is
given a paths file ordered so that task 0 reads the first parts, task 1 the next ones
(`contiguous_paths`), and exact dedup's `document_priority` prefers earlier parts. MinHash
clustering has no priority; it unions by cluster size, so in a cluster of three or more the
survivor may still not be the first.

Timing: the chain runs in a subprocess; wall time is that subprocess's, CPU time its own plus
all its descendants' (getrusage RUSAGE_CHILDREN in the parent, the way bench_shard.py times
our stage). That includes interpreter start-up and importing datatrove and spaCy, as ours
includes the start-up of the `corpus` CLI. The pools use the "fork" start method, not
datatrove's default "forkserver": forkserver workers are not our descendants, so their CPU time
would be lost, and forkserver would only add start-up cost.

Word tokenizer: datatrove splits English words with spaCy (`spacy.blank("en")`, rule-based, no
model download) in the Gopher filters and the MinHash shingling. spaCy is not a dependency of
datatrove; if it is not installed, this script substitutes a regex word splitter
(`RegexWordTokenizer`) and says so in the report (field "word_tokenizer").

Requirements beyond the bench extra (datatrove itself): `regex` and `orjson` (datatrove imports
them in the text utilities and the JSONL reader/writer; they belong to its "processing" and "io"
extras) and, for the real word split, `spacy`. Datatrove also pins xxhash<4 in "processing"
while we use xxhash 4, which no longer hashes str; the shim below restores xxhash 3's behaviour
(hash the UTF-8 bytes) for datatrove's exact-dedup keys and MinHash shingles.

datatrove's logs go to the work dir (logs/ per executor, datatrove.log for the console output),
not to the report.
"""

import argparse
import functools
import json
import re
import resource
import shutil
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import datatrove.utils.hashes.xxhash as datatrove_xxhash
import xxhash
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import (
    ExactDedupConfig,
    ExactDedupFilter,
    ExactDedupSignature,
    ExactFindDedups,
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter
from datatrove.pipeline.formatters import PIIFormatter
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter, ParquetWriter
from datatrove.utils.word_tokenizers import WordTokenizer, strip_strings
from truth_score import score

MINHASH = {"n_grams": 5, "num_buckets": 14, "hashes_per_bucket": 8, "seed": 1}
CHAIN = [
    "JsonlReader(part-*.jsonl, contiguous split) -> GopherQualityFilter -> GopherRepetitionFilter "
    "-> JsonlWriter(filtered) -> ExactDedupSignature",
    "ExactFindDedups",
    "JsonlReader(filtered) -> ExactDedupFilter -> JsonlWriter(exact) -> MinhashDedupSignature",
    "MinhashDedupBuckets",
    "MinhashDedupCluster",
    "JsonlReader(exact) -> MinhashDedupFilter -> PIIFormatter -> ParquetWriter(output)",
]


if int(xxhash.VERSION.split(".")[0]) >= 4:
    # datatrove hashes str with xxhash and pins xxhash<4 (its "processing" extra); xxhash 4
    # (ours) hashes bytes only. These do what xxhash 3 did with a str: hash its UTF-8 bytes.
    def _xxhash32(data: str | bytes) -> int:
        return xxhash.xxh32_intdigest(data.encode("utf-8") if isinstance(data, str) else data)

    def _xxhash64(data: str | bytes) -> int:
        return xxhash.xxh64_intdigest(data.encode("utf-8") if isinstance(data, str) else data)

    datatrove_xxhash.xxhash32, datatrove_xxhash.xxhash64 = _xxhash32, _xxhash64


def exact_key(doc: Any) -> str:
    """The exact-dedup key, as ours: NFC, every run of whitespace one space."""
    return " ".join(unicodedata.normalize("NFC", doc.text).split())


def earlier_part_first(doc: Any, priority: dict[str, int]) -> int:
    """Exact-dedup priority (higher is kept): documents of earlier input files first."""
    return priority[Path(doc.metadata["file_path"]).name]


def contiguous_paths(files: list[str], tasks: int) -> list[str]:
    """Order `files` so that datatrove's reader (task r reads lines r, r + tasks, ...) gives
    task 0 the first files, task 1 the next ones, and so on, in order."""
    shares = [len(files[r::tasks]) for r in range(tasks)]  # what each task reads either way
    starts = [sum(shares[:r]) for r in range(tasks)]
    return [files[starts[i % tasks] + i // tasks] for i in range(len(files))]


class RegexWordTokenizer(WordTokenizer):
    """Words as runs of word characters or of punctuation (close to spaCy's split)."""

    _words = re.compile(r"\w+(?:'\w+)?|[^\w\s]+")
    _sentences = re.compile(r"[^.!?\n]+[.!?\n]*")

    def __init__(self) -> None:
        super().__init__("en")

    def word_tokenize(self, text: str) -> list[str]:
        return self._words.findall(text)

    def sent_tokenize(self, text: str) -> list[str]:
        return strip_strings(self._sentences.findall(text))

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in self._sentences.finditer(text)]


def word_tokenizer(force_regex: bool = False) -> tuple[Any, str]:
    """The `language` argument for datatrove's word-splitting steps, and what it is."""
    if not force_regex:
        try:
            import spacy
        except ImportError:
            pass
        else:
            return "en", f"spaCy {spacy.__version__} blank('en') via datatrove's SpaCyTokenizer"
    why = "--regex-tokenizer" if force_regex else "spaCy is not installed"
    return RegexWordTokenizer(), f"regex fallback RegexWordTokenizer ({why})"


def build_chain(data_dir: Path, work: Path, workers: int, language: Any) -> list[Any]:
    """The six executors of the chain (see the module docstring), in order."""
    parts = sorted(p.name for p in data_dir.glob("part-*.jsonl"))
    paths = work / "inputs.txt"
    paths.write_text("\n".join(contiguous_paths(parts, workers)) + "\n", encoding="utf-8")
    priority = {name: 65535 - min(i, 65534) for i, name in enumerate(parts)}
    exact = ExactDedupConfig(
        content_getter=exact_key,
        document_priority=functools.partial(earlier_part_first, priority=priority),
    )
    minhash = MinhashConfig(**MINHASH)

    def executor(name: str, pipeline: list[Any], tasks: int) -> tuple[str, Any]:
        return name, LocalPipelineExecutor(
            pipeline,
            tasks=tasks,
            workers=min(workers, tasks),
            logging_dir=str(work / "logs" / name),
            skip_completed=False,
            start_method="fork",
        )

    def reader(folder: Path, **files: Any) -> Any:
        return JsonlReader(str(folder), text_key="text", id_key="id", **files)

    def jsonl(folder: str) -> Any:
        return JsonlWriter(str(work / folder), compression=None)

    return [
        executor(
            "1-filter+exact-sig",
            [
                reader(data_dir, paths_file=str(paths)),
                GopherQualityFilter(
                    min_doc_words=10,
                    max_doc_words=200_000,
                    min_avg_word_length=2.5,
                    max_avg_word_length=10,
                    max_symbol_word_ratio=0.1,
                    max_non_alpha_words_ratio=0.8,
                    language=language,
                ),
                GopherRepetitionFilter(
                    dup_line_frac=0.5, dup_line_char_frac=0.3, language=language
                ),
                jsonl("filtered"),
                ExactDedupSignature(str(work / "exact-sigs"), config=exact),
            ],
            workers,
        ),
        executor(
            "2-exact-find",
            [ExactFindDedups(str(work / "exact-sigs"), str(work / "exact-dups"), config=exact)],
            1,
        ),
        executor(
            "3-exact-filter+minhash-sig",
            [
                reader(work / "filtered", glob_pattern="*.jsonl"),
                ExactDedupFilter(str(work / "exact-dups"), config=exact),
                jsonl("exact"),
                MinhashDedupSignature(
                    str(work / "minhash-sigs"), config=minhash, language=language
                ),
            ],
            workers,
        ),
        executor(
            "4-minhash-buckets",
            [
                MinhashDedupBuckets(
                    str(work / "minhash-sigs"), str(work / "minhash-buckets"), config=minhash
                )
            ],
            minhash.num_buckets,
        ),
        executor(
            "5-minhash-cluster",
            [
                MinhashDedupCluster(
                    str(work / "minhash-buckets"), str(work / "minhash-remove"), config=minhash
                )
            ],
            1,
        ),
        executor(
            "6-minhash-filter+pii+write",
            [
                reader(work / "exact", glob_pattern="*.jsonl"),
                MinhashDedupFilter(str(work / "minhash-remove")),
                PIIFormatter(),
                ParquetWriter(str(work / "output")),
            ],
            workers,
        ),
    ]


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _counts(stats: Any) -> dict[str, dict[str, int]]:
    """{step name: {counter: total}} from an executor's merged PipelineStats."""
    out: dict[str, dict[str, int]] = {}
    for step in stats.stats if stats else []:
        counters = {k: int(v.total) for k, v in step.stats.items() if k != "doc_len"}
        if counters:
            name = " ".join(step.name.encode("ascii", "ignore").decode().split())  # no emoji
            out[name.removeprefix("- ")] = counters
    return out


def run_chain(data_dir: Path, work: Path, workers: int, regex: bool = False) -> dict[str, Any]:
    """Run the chain in this process (bench harness: use `run_datatrove`); per-stage timings."""
    from loguru import logger

    logger.remove()  # each datatrove task re-adds its own sinks; the caller captures stderr
    language, tokenizer = word_tokenizer(force_regex=regex)
    stages: dict[str, dict[str, float]] = {}
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for name, ex in build_chain(data_dir, work, workers, language):
        cpu, start = _cpu(), time.perf_counter()
        stats = ex.run()
        stages[name] = {
            "tasks": ex.tasks,
            "wall_s": round(time.perf_counter() - start, 2),
            "cpu_s": round(_cpu() - cpu, 2),
        }
        counts[name] = _counts(stats)
    return {"word_tokenizer": tokenizer, "stages": stages, "counts": counts}


def drops(counts: dict[str, dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """Filter drops by reason and duplicates removed, like our stage's summary."""
    dropped: dict[str, int] = {}
    duplicates = {"exact": 0, "near": 0}
    for steps in counts.values():
        for step, counters in steps.items():
            if step.startswith("FILTER"):
                for key, n in counters.items():
                    if key.startswith("dropped_"):
                        reason = key.removeprefix("dropped_")
                        dropped[reason] = dropped.get(reason, 0) + n
            elif step == "DEDUPS: exact-deduplication stage 3":
                duplicates["exact"] += counters.get("dropped", 0)
            elif step == "DEDUP: MinHash stage 4":
                duplicates["near"] += counters.get("dropped", 0)
    return {"dropped": dropped, "duplicates": duplicates}


def read_output(folder: Path) -> dict[str, str]:
    """{id: text} of the documents datatrove kept."""
    import pyarrow.parquet as pq

    texts: dict[str, str] = {}
    for path in sorted(folder.glob("*.parquet")):
        t = pq.read_table(path, columns=["id", "text"])
        texts.update(zip(t.column("id").to_pylist(), t.column("text").to_pylist(), strict=True))
    return texts


def run_datatrove(
    data_dir: Path, work_dir: Path, workers: int = 2, regex_tokenizer: bool = False
) -> dict[str, Any]:
    """Run the chain in a subprocess over data_dir (a make_corpus.py output); time and score it.

    Returns wall_s, cpu_s, mb_per_s_wall, mb_per_cpu_s, truth_score.score's quality fields on
    the kept documents, the word tokenizer used, per-stage timings, drops by reason and
    duplicates removed (datatrove's full counters: work_dir/chain.json; its log:
    work_dir/datatrove.log and work_dir/logs/).
    work_dir is deleted first (datatrove would otherwise skip finished tasks). regex_tokenizer
    uses RegexWordTokenizer even when spaCy is installed (to see what the word split costs).
    """
    data_dir, work_dir = Path(data_dir).resolve(), Path(work_dir).resolve()
    truth = json.loads((data_dir / "truth.json").read_text(encoding="utf-8"))
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    cmd = [sys.executable, __file__, "--chain", str(data_dir), str(work_dir), str(workers)]
    cmd += ["regex"] if regex_tokenizer else []
    log = work_dir / "datatrove.log"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as sink:
        rc = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RuntimeError(f"datatrove chain exited {rc} (log: {log}):\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    chain = json.loads((work_dir / "chain.json").read_text(encoding="utf-8"))
    kept = read_output(work_dir / "output")
    mb = truth["bytes"] / 1e6
    quality = score(truth, kept)
    return {
        "chain": CHAIN,
        "word_tokenizer": chain["word_tokenizer"],
        "workers": workers,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "mb_per_s_wall": round(mb / wall, 2),
        "mb_per_cpu_s": round(mb / cpu, 2),
        **{k: (round(v, 5) if isinstance(v, float) else v) for k, v in quality.items()},
        "documents_out": len(kept),
        **drops(chain["counts"]),
        "stages": chain["stages"],
        "work_dir": str(work_dir),
    }


def main() -> int:
    if sys.argv[1:2] == ["--chain"]:  # the subprocess of run_datatrove
        data_dir, work = Path(sys.argv[2]), Path(sys.argv[3])
        result = run_chain(data_dir, work, int(sys.argv[4]), regex=sys.argv[5:] == ["regex"])
        (work / "chain.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a make_corpus.py output directory")
    ap.add_argument("--work", type=Path, help="default: <data>/../datatrove-<data name>")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--regex-tokenizer", action="store_true", help="split words by regex, not spaCy"
    )
    args = ap.parse_args()
    work = args.work or args.data.resolve().parent / f"datatrove-{args.data.name}"
    print(json.dumps(run_datatrove(args.data, work, args.workers, args.regex_tokenizer), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
