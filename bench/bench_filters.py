"""Our quality filters against datatrove's and two language identifiers against each other.

    python bench/bench_filters.py language            # fastText lid.176 vs py3langid
    python bench/bench_filters.py agreement [--mb 3]  # ours vs datatrove, per filter
    python bench/bench_filters.py stage [--mb 4] [--workers 2] [--repeats 3]  # whole stage

`language`: both models on the repository's real samples (the 1,727 TinyStories stories and
the 641 Shakespeare scenes of `bench/make_corpus.py`, all English) and on the hand-written
paragraphs of MULTILINGUAL below (12 languages); accuracy is the share of documents whose top
language is the right one with a probability of at least 0.65 (datatrove's threshold), speed
is microseconds per document on one core, after loading (load time printed apart).

`agreement`: datatrove's GopherRepetitionFilter, GopherQualityFilter, C4QualityFilter,
FineWebQualityFilter and LanguageFilter at their default thresholds, and ours with the same
thresholds (`[filters] preset`, `languages = ["en"]`), on the same documents: the real
samples and a generated benchmark corpus (`make_corpus.py`, junk included). Printed per
filter: documents, agreement on keep/drop, each side's seconds and the speed ratio (ours
over all the documents at once, `QualityFilter.many`, as the shard stage runs it; datatrove's
`filter` document by document, as its pipeline runs it). The LanguageFilter is given the
model file ours uses (the lid.176.ftz bundled in corpus_assets/models; datatrove would
download lid.176.bin), read by the same `fasttext` module (fasttext-numpy2-wheel). Needs the `bench`
extra: datatrove, spaCy (datatrove's English words; NLTK is not used for English) and
fasteners.

`stage`: the whole shard stage with every filter on against datatrove's pipeline of the same
filters, on the same JSONL input (a `make_corpus.py` corpus of `--mb` MB, seed 0, footer
copies on, 8 files). Ours: `corpus run --stage fetch`, then `--stage shard --workers N` with
`[filters] preset = ["gopher", "c4", "fineweb"]` and `languages = ["en"]` (the stage also
dedups, scrubs PII and writes Parquet shards and a manifest). Theirs: JsonlReader ->
GopherRepetitionFilter -> GopherQualityFilter -> C4QualityFilter -> FineWebQualityFilter ->
LanguageFilter (en, 0.65, the same lid.176.ftz file) -> JsonlWriter, in a
`LocalPipelineExecutor(tasks=N, workers=N, start_method="fork")`. Each side runs in
subprocesses from a clean output folder, interpreter start-up and imports included (datatrove's
imports nothing of ours: it is given the model file's path); the two alternate `--repeats`
times and the best wall time of each is compared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

THRESHOLD = 0.65
MULTILINGUAL = {
    "fr": "La rivière passait devant le vieux moulin, et la fille du meunier la regardait depuis "
    "sa fenêtre. Chaque matin, elle comptait les bateaux qui portaient le grain vers la ville.",
    "de": "Der Fluss floss an der alten Mühle vorbei, und die Tochter des Müllers sah ihm von "
    "ihrem Fenster aus zu. Jeden Morgen zählte sie die Boote, die Getreide in die Stadt brachten.",
    "es": "El río pasaba junto al viejo molino, y la hija del molinero lo miraba desde su "
    "ventana. Cada mañana contaba los barcos que llevaban el grano al pueblo bajo las colinas.",
    "it": "Il fiume scorreva accanto al vecchio mulino e la figlia del mugnaio lo guardava dalla "
    "sua finestra. Ogni mattina contava le barche che portavano il grano alla città.",
    "nl": "De rivier stroomde langs de oude molen en de dochter van de molenaar keek ernaar "
    "vanuit haar raam. Elke ochtend telde ze de boten die het graan naar de stad brachten.",
    "pt": "O rio passava pelo velho moinho, e a filha do moleiro olhava-o da sua janela. Todas "
    "as manhãs ela contava os barcos que levavam o trigo para a cidade abaixo das colinas.",
    "sv": "Floden rann förbi den gamla kvarnen, och mjölnarens dotter såg den från sitt fönster. "
    "Varje morgon räknade hon båtarna som förde säden till staden nedanför kullarna.",
    "pl": "Rzeka płynęła obok starego młyna, a córka młynarza patrzyła na nią ze swojego okna. "
    "Każdego ranka liczyła łodzie, które wiozły zboże do miasta pod wzgórzami.",
    "ru": "Река текла мимо старой мельницы, и дочь мельника смотрела на неё из своего окна. "
    "Каждое утро она считала лодки, которые везли зерно в город под холмами.",
    "tr": "Nehir eski değirmenin önünden akıyordu ve değirmencinin kızı onu penceresinden "
    "izliyordu. Her sabah tahılı tepelerin altındaki kasabaya taşıyan tekneleri sayardı.",
    "fi": "Joki virtasi vanhan myllyn ohi, ja myllärin tytär katseli sitä ikkunastaan. Joka "
    "aamu hän laski veneet, jotka veivät viljaa kukkuloiden alla olevaan kaupunkiin.",
    "id": "Sungai itu mengalir melewati kincir tua, dan putri penggiling memandanginya dari "
    "jendelanya. Setiap pagi dia menghitung perahu yang membawa gandum ke kota di bawah bukit.",
}


def _timed(fn: Callable[[str], tuple[str, float]], docs: list[str]) -> tuple[list[Any], float]:
    start = time.perf_counter()
    out = [fn(d) for d in docs]
    return out, time.perf_counter() - start


def language() -> dict[str, Any]:
    """fastText lid.176 (the bundled file) and py3langid on the same documents."""
    import make_corpus

    english = make_corpus.stories() + make_corpus.scenes()
    other = list(MULTILINGUAL.items())
    results: dict[str, Any] = {"english_documents": len(english), "other_documents": len(other)}
    for name, load in (("fasttext_lid176", _fasttext), ("py3langid", _py3langid)):
        start = time.perf_counter()
        fn = load()
        loaded = time.perf_counter() - start
        got, seconds = _timed(fn, english)
        right = sum(lang == "en" and p >= THRESHOLD for lang, p in got)
        others = [fn(text) for _, text in other]
        hits = sum(
            lang == code and p >= THRESHOLD
            for (code, _), (lang, p) in zip(other, others, strict=True)
        )
        results[name] = {
            "load_seconds": round(loaded, 3),
            "us_per_document": round(seconds / len(english) * 1e6, 1),
            "english_right": right,
            "other_right": hits,
            "other_wrong": {c: g for (c, _), g in zip(other, others, strict=True) if g[0] != c},
        }
    return results


def _fasttext() -> Callable[[str], tuple[str, float]]:
    import fasttext  # type: ignore[import-untyped]

    from corpus_assets.core.config import language_model_file

    model = fasttext.load_model(str(language_model_file()))

    def identify(text: str) -> tuple[str, float]:
        labels, probs = model.predict(text.replace("\n", " "), k=1)
        return labels[0].removeprefix("__label__"), min(float(probs[0]), 1.0)

    return identify


def _py3langid() -> Callable[[str], tuple[str, float]]:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier  # type: ignore[import-untyped]

    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)

    def identify(text: str) -> tuple[str, float]:
        lang, prob = ident.classify(text)
        return str(lang), float(prob)

    return identify


# --- agreement with datatrove ----------------------------------------------------------------

REPETITION = (
    "max_duplicate_line_fraction",
    "max_duplicate_line_char_fraction",
    "max_duplicate_paragraph_fraction",
    "max_duplicate_paragraph_char_fraction",
    *(f"max_top_{n}gram_char_fraction" for n in (2, 3, 4)),
    *(f"max_duplicate_{n}gram_char_fraction" for n in range(5, 11)),
)


def _ours() -> dict[str, Callable[[list[str]], list[str | None]]]:
    """Our filters, one reference filter's thresholds each and nothing else on: each gives the
    drop reasons (None: kept) of many texts, run as the shard stage runs them."""
    from corpus_assets.core.config import FILTER_PRESETS, FilterSpec
    from corpus_assets.core.text.filters import QualityFilter
    from corpus_assets.core.text.language import LanguageId

    keep = ("enabled", "preset", "short_line_length", "min_language_score")
    bare = {k: None for k in FilterSpec.model_fields if k not in keep}
    gopher = FILTER_PRESETS["gopher"]
    repetition = {k: v for k, v in gopher.items() if k in REPETITION}
    quality = {k: v for k, v in gopher.items() if k not in REPETITION}
    language = LanguageId(["en"], THRESHOLD)
    ours = {
        name: _reasons(QualityFilter(FilterSpec(**{**bare, **rules})))
        for name, rules in (
            ("GopherRepetitionFilter", repetition),
            ("GopherQualityFilter", quality),
            ("C4QualityFilter", FILTER_PRESETS["c4"]),
            ("FineWebQualityFilter", FILTER_PRESETS["fineweb"]),
        )
    }
    ours["LanguageFilter"] = lambda texts: [language(text)[2] for text in texts]
    return ours


def _reasons(quality: Any) -> Callable[[list[str]], list[str | None]]:
    def reasons(texts: list[str]) -> list[str | None]:
        return [reason for _, reason in quality.many(texts)]

    return reasons


def _theirs() -> dict[str, Callable[[str], bool]]:
    """datatrove's filters at their defaults; LanguageFilter on the same lid.176.ftz file."""
    import datatrove.pipeline.base as base
    import datatrove.utils.lid as lid
    import fasttext
    import numpy as np
    from datatrove.data import Document
    from datatrove.pipeline import filters as dt

    from corpus_assets.core.config import language_model_file

    # the model file is given below, never downloaded: datatrove's dependency checks are moot
    base.check_required_dependencies = lambda *_a, **_k: None
    lid.check_required_dependencies = lambda *_a, **_k: None
    model = fasttext.load_model(str(language_model_file()))

    class _Numpy:  # datatrove calls .item() on each score: numpy values, whatever the wheel
        def predict(self, text: str, k: int = 1) -> tuple[Any, Any]:
            labels, probs = model.predict(text, k=k)
            return labels, np.asarray(probs)

    language = dt.LanguageFilter(languages=["en"], language_threshold=THRESHOLD)
    language.model._model = _Numpy()
    steps = {
        "GopherRepetitionFilter": dt.GopherRepetitionFilter(),
        "GopherQualityFilter": dt.GopherQualityFilter(),
        "C4QualityFilter": dt.C4QualityFilter(),
        "FineWebQualityFilter": dt.FineWebQualityFilter(),
        "LanguageFilter": language,
    }

    def kept(step: Any) -> Callable[[str], bool]:
        def run(text: str) -> bool:
            out = step.filter(Document(text=text, id="x"))
            return bool(out[0] if isinstance(out, tuple) else out)

        return run

    return {name: kept(step) for name, step in steps.items()}


def documents(mb: float) -> list[tuple[str, str]]:
    """(name, text): the real samples, then a generated corpus of `mb` MB (junk included)."""
    import make_corpus

    from corpus_assets.core.text.normalize import normalize

    real = [(f"story-{i}", t) for i, t in enumerate(make_corpus.stories())]
    real += [(f"scene-{i}", t) for i, t in enumerate(make_corpus.scenes())]
    generated = [(i, t) for i, t in make_corpus.build(mb, 0, footers=0.02).docs]
    return [(name, normalize(text)) for name, text in real + generated]


def agreement(mb: float) -> dict[str, Any]:
    """Per filter: documents, agreement on keep/drop, seconds of each side, speed ratio."""
    docs = documents(mb)
    texts = [t for _, t in docs]
    ours, theirs = _ours(), _theirs()
    report: dict[str, Any] = {"documents": len(docs)}
    for name in ours:
        start = time.perf_counter()
        our_reasons = ours[name](texts)
        our_s = time.perf_counter() - start
        our_keep = [reason is None for reason in our_reasons]
        start = time.perf_counter()
        their_keep = [theirs[name](t) for t in texts]
        their_s = time.perf_counter() - start
        differ = [i for i, (a, b) in enumerate(zip(our_keep, their_keep, strict=True)) if a != b]
        report[name] = {
            "agreement": round(1 - len(differ) / len(texts), 5),
            "kept_ours": sum(our_keep),
            "kept_theirs": sum(their_keep),
            "we_keep_they_drop": sum(our_keep[i] for i in differ),
            "we_drop_they_keep": sum(not our_keep[i] for i in differ),
            "examples": [
                {"doc": docs[i][0], "ours": our_reasons[i], "theirs_keep": their_keep[i]}
                for i in differ[:5]
            ],
            "ours_s": round(our_s, 3),
            "theirs_s": round(their_s, 3),
            "speed_ratio": round(their_s / max(our_s, 1e-9), 2),
        }
    return report


# --- the whole stage against datatrove's pipeline -------------------------------------------

OUT = REPO / "bench" / "out" / "filters"
STAGE_FILTERS = '[filters]\npreset = ["gopher", "c4", "fineweb"]\nlanguages = ["en"]\n'


class _FastTextFile:
    """lid.176.ftz for datatrove's LanguageFilter: loaded on first use in each worker (it is
    pickled to the pool), scores as numpy arrays (datatrove calls .item() on them)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._model: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "_model": None}

    def predict(self, text: str, k: int = 1) -> tuple[Any, Any]:
        import fasttext
        import numpy as np

        if self._model is None:
            self._model = fasttext.load_model(self.path)
        labels, probs = self._model.predict(text, k=k)
        return labels, np.asarray(probs)


def datatrove_stage(data: Path, work: Path, workers: int, model: Path) -> dict[str, Any]:
    """datatrove's pipeline of the same filters over data's part-*.jsonl (in this process),
    its LanguageFilter on the fastText file `model`. Nothing of ours is imported here."""
    import datatrove.pipeline.base as base
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline import filters as dt
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from loguru import logger

    logger.remove()
    base.check_required_dependencies = lambda *_a, **_k: None  # see _theirs
    language = dt.LanguageFilter(languages=["en"], language_threshold=THRESHOLD)
    language.model._model = _FastTextFile(str(model))
    pipeline = [
        JsonlReader(str(data), glob_pattern="part-*.jsonl", text_key="text", id_key="id"),
        dt.GopherRepetitionFilter(),
        dt.GopherQualityFilter(),
        dt.C4QualityFilter(),
        dt.FineWebQualityFilter(),
        language,
        JsonlWriter(str(work / "output"), compression=None),
    ]
    executor = LocalPipelineExecutor(
        pipeline,
        tasks=workers,
        workers=workers,
        logging_dir=str(work / "logs"),
        skip_completed=False,
        start_method="fork",
    )
    stats = executor.run()
    dropped: dict[str, int] = {}
    for step in stats.stats:
        counts = {k: int(v.total) for k, v in step.stats.items() if k.startswith("dropped")}
        if list(counts) == ["dropped"]:  # LanguageFilter gives no reason: its name instead
            counts = {
                " ".join(step.name.encode("ascii", "ignore").decode().split()): counts["dropped"]
            }
        for key, n in counts.items():
            if key != "dropped":
                reason = key.removeprefix("dropped_")
                dropped[reason] = dropped.get(reason, 0) + n
    kept = sum(1 for f in (work / "output").glob("*.jsonl") for _ in f.open(encoding="utf-8"))
    return {"documents_out": kept, "dropped": dropped}


def _corpus(mb: float) -> Path:
    data = OUT / f"corpus-{mb:g}mb-f0.02"
    if not (data / "truth.json").exists():
        make = [sys.executable, str(REPO / "bench" / "make_corpus.py"), "--out", str(data)]
        make += ["--mb", str(mb), "--seed", "0", "--footers", "0.02"]
        subprocess.run(make, check=True, capture_output=True)
    return data


def _run(cmd: list[str]) -> tuple[str, float]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, text=True, capture_output=True, env={**os.environ})
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-3000:]}")
    return proc.stdout, seconds


def _ours_once(data: Path, workers: int) -> dict[str, Any]:
    root, cfg = OUT / "root", OUT / "stage.toml"
    shutil.rmtree(root, ignore_errors=True)
    cfg.write_text(
        'dataset = "bench"\nversion = "filters"\ntokenizer = {id = "bytes"}\n'
        f'[[sources]]\nname = "bench"\nkind = "jsonl"\npath = "{data / "part-*.jsonl"}"\n'
        f'id_field = "id"\nlicense = "cdla-sharing-1.0"\n{STAGE_FILTERS}',
        encoding="utf-8",
    )
    cli = [sys.executable, "-m", "corpus_assets.cli", "run", "--config", str(cfg)]
    _, fetch_s = _run([*cli, "--stage", "fetch", "--root", str(root)])
    out, shard_s = _run([*cli, "--stage", "shard", "--root", str(root), "--workers", str(workers)])
    summary = json.loads(out)
    return {
        "wall_s": round(fetch_s + shard_s, 2),
        "fetch_s": round(fetch_s, 2),
        "shard_s": round(shard_s, 2),
        "documents_out": summary.get("documents_out"),
        "dropped": summary.get("dropped"),
    }


def _theirs_once(data: Path, workers: int) -> dict[str, Any]:
    work = OUT / "datatrove"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    from corpus_assets.core.config import language_model_file

    cmd = [sys.executable, __file__, "--datatrove-stage", str(data), str(work), str(workers)]
    cmd.append(str(language_model_file()))
    _, wall = _run(cmd)
    return {"wall_s": round(wall, 2), **json.loads((work / "stage.json").read_text())}


def stage(mb: float, workers: int, repeats: int) -> dict[str, Any]:
    """Both sides `repeats` times, alternating; each side's best wall time and their ratio."""
    data = _corpus(mb)
    truth = json.loads((data / "truth.json").read_text(encoding="utf-8"))
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    for _ in range(repeats):
        ours.append(_ours_once(data, workers))
        theirs.append(_theirs_once(data, workers))
    best_ours = min(ours, key=lambda r: r["wall_s"])
    best_theirs = min(theirs, key=lambda r: r["wall_s"])
    return {
        "corpus_mb": round(truth["bytes"] / 1e6, 2),
        "documents": truth["documents"],
        "workers": workers,
        "ours_wall_s": [r["wall_s"] for r in ours],
        "theirs_wall_s": [r["wall_s"] for r in theirs],
        "ours": best_ours,
        "theirs": best_theirs,
        "speed_ratio": round(best_theirs["wall_s"] / best_ours["wall_s"], 2),
        "speed_ratio_shard_only": round(best_theirs["wall_s"] / best_ours["shard_s"], 2),
    }


def main() -> None:
    if sys.argv[1:2] == ["--datatrove-stage"]:  # the subprocess of _theirs_once
        data, work, workers = Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
        result = datatrove_stage(data, work, workers, Path(sys.argv[5]))
        (work / "stage.json").write_text(json.dumps(result), encoding="utf-8")
        return
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("what", choices=["language", "agreement", "stage"])
    ap.add_argument("--mb", type=float, help="generated corpus size (agreement 3, stage 4)")
    ap.add_argument("--workers", type=int, default=2, help="stage: workers of each side")
    ap.add_argument("--repeats", type=int, default=3, help="stage: runs of each side")
    args = ap.parse_args()
    if args.what == "language":
        print(json.dumps(language(), indent=1, ensure_ascii=False))
    elif args.what == "agreement":
        print(json.dumps(agreement(args.mb or 3.0), indent=1))
    else:
        print(json.dumps(stage(args.mb or 4.0, args.workers, args.repeats), indent=1))


if __name__ == "__main__":
    main()
