"""Live responses: calibrate against a model served behind an OpenAI-compatible API.

`live_responses(...)` is a calibration factory for any server of `/v1/chat/completions` (vLLM,
SGLang, llama.cpp, a hosted API). Before its first request it reads `GET /v1/models`: the
server must serve `model` (else a CalibrationError, exit 65, before any task is sent), and the
served id and whatever digest the server reports become the provenance's `model_ref` and
`backend_model_digest` (`"unreported"` when it reports none). Each task's chat messages come
from the public task alone: the recipe's `prompt(task)` when it has one, else the task's
`input` when that is a string (one user message) or a list of `{role, content}` messages.
All repeats of a task are one request with `n = repeats`; a server that answers fewer choices
(it ignores `n`) is asked the rest in separate requests (with a `seed`, repeat r is sent with
seed + r). At most `max_concurrency` requests are in flight, and each request's answers are
handed to the executor's `context.keep` before its slot takes the next request, so a kill
re-asks at most the requests in flight; a call asked again returns what `context.answered`
holds without asking for it. Faults are retried as `retrying.py` says; an answer that ended for
the model's reason (`length`, `content_filter`) is an attempt with that `failure_reason`
(`chat.py`). The API key is read from the environment variable named by `api_key_env` when a
request is made, and written nowhere; a `base_url` with a user, password or query string in it
is refused (exit 64) without showing it. With `record_dir`, the answers are also kept as
replayable report files (`record.py`). `settings.py` checks the params.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections import ChainMap
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import openai

from corpus_assets.calibrators.chat import (
    Served,
    default_messages,
    messages_of,
    pick_model,
    read_choices,
)
from corpus_assets.calibrators.record import Recorder
from corpus_assets.calibrators.retrying import with_retries
from corpus_assets.calibrators.settings import Settings, check_settings
from corpus_assets.core.errors import ConfigError
from corpus_assets.tasks.calibration import (
    Attempt,
    CalibrationBatch,
    CalibrationContext,
)
from corpus_assets.tasks.types import JSON, PublicTask

MODULES = ("openai", "chat", "record", "retrying", "settings")  # the calibrator's code
Pair = tuple[str, int]
Keep = Callable[[Sequence[Attempt]], Awaitable[None]]
NO_KEY = "EMPTY"  # what a local server without a key accepts (vLLM's convention)


def live_responses(
    *,
    base_url: str,
    model: str,
    harness_ref: str,
    verifier_digest: str,
    api_key_env: str | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    stop: Sequence[str] | None = None,
    request_timeout_s: float = 600.0,
    max_concurrency: int = 8,
    request_retries: int = 4,
    record_dir: str | None = None,
    config_dir: str = ".",
) -> LiveResponses:
    """The factory `calibration.implementation` names; nothing is sent until the first call."""
    _no_credentials(base_url)
    settings = check_settings(
        base_url=base_url, model=model, harness_ref=harness_ref,
        verifier_digest=verifier_digest, api_key_env=api_key_env, temperature=temperature,
        top_p=top_p, max_tokens=max_tokens, seed=seed, stop=stop,
        request_timeout_s=request_timeout_s, max_concurrency=max_concurrency,
        request_retries=request_retries, record_dir=record_dir, config_dir=config_dir,
    )  # fmt: skip
    return LiveResponses(settings)


def _no_credentials(base_url: object) -> None:
    """A ConfigError for a base URL that carries a credential (which it does not repeat)."""
    if not isinstance(base_url, str):
        return  # check_settings names the problem
    parts = urlsplit(base_url)
    if "@" in parts.netloc or parts.query:
        raise ConfigError(
            "live_responses: base_url has a user, password or query string in it; a key comes "
            "from the environment variable api_key_env names (e.g. OPENAI_API_KEY), never "
            "from the config"
        )


class LiveResponses:
    """An async calibrator that asks a served model, at most `max_concurrency` requests at once."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.served: Served | None = None
        self.recorder: Recorder | None = None
        self.ignores_n = False  # the server answered fewer choices than `n`
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._limit = asyncio.Semaphore(settings.max_concurrency)
        self._asking = asyncio.Lock()

    def source_files(self) -> list[Path]:
        """This module and its helpers: a resume after the calibrator's code changed is refused."""
        here = Path(__file__).resolve().parent
        return [here / f"{name}.py" for name in MODULES]

    async def __call__(
        self, tasks: Sequence[PublicTask], context: CalibrationContext
    ) -> CalibrationBatch:
        self._bind()
        prompt = context.prompt or default_messages
        asked = [(task, messages_of(prompt, task)) for task in tasks]
        served = await self._identify()
        known: ChainMap[Pair, Attempt] = ChainMap(dict(context.answered))
        if self.recorder is not None:  # what the executor's journal lacks, the record may hold
            known.maps.append(self.recorder.load(context.batch_index))
        repeats = context.repeats
        todo = [
            (t, m) for t, m in asked if any((t.task_id, r) not in known for r in range(repeats))
        ]
        results = await asyncio.gather(
            *(self._ask(t, m, repeats, known, context.keep) for t, m in todo),
            return_exceptions=True,
        )
        fresh = {(a.task_id, a.repeat): a for r in results if isinstance(r, list) for a in r}
        answers = known.new_child(fresh)
        if self.recorder is not None:
            await self.recorder.keep(context.batch_index, self._unrecorded(tasks, repeats, answers))
        for result in results:
            if isinstance(result, BaseException):
                raise result
        if self.recorder is not None:
            await self.recorder.finish(context.batch_index, context.batch_task_ids, repeats)
        attempts = tuple(answers[(t.task_id, r)] for t in tasks for r in range(repeats))
        return CalibrationBatch(attempts, self._provenance(served, context))

    def _unrecorded(
        self, tasks: Sequence[PublicTask], repeats: int, answers: Mapping[Pair, Attempt]
    ) -> list[Attempt]:
        """The answers of the tasks answered in full that the record does not hold yet."""
        assert self.recorder is not None
        return [
            answers[(t.task_id, r)]
            for t in tasks
            if all((t.task_id, r) in answers for r in range(repeats))
            and (t.task_id, 0) not in self.recorder.known
            for r in range(repeats)
        ]

    def _bind(self) -> None:
        """A client and a limit for the running event loop (a retried job may bring a new one)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._client = None
            self._limit = asyncio.Semaphore(self.settings.max_concurrency)
            self._asking = asyncio.Lock()

    def client(self) -> openai.AsyncOpenAI:
        """The loop's client; the key is read from the environment here, never stored elsewhere."""
        if self._client is None:
            key = NO_KEY
            if self.settings.api_key_env is not None:
                key = os.environ.get(self.settings.api_key_env, "")
                if not key:
                    raise ConfigError(
                        f"live_responses: the environment variable {self.settings.api_key_env!r} "
                        "(api_key_env) is not set"
                    )
            self._client = openai.AsyncOpenAI(
                base_url=self.settings.base_url, api_key=key,
                timeout=self.settings.timeout_s, max_retries=0,
            )  # fmt: skip
        return self._client

    async def _identify(self) -> Served:
        """Read `GET /models` once; the server must serve `model`."""
        async with self._asking:
            if self.served is None:
                page = await with_retries(
                    self.client().models.list, f"GET {self.settings.base_url}/models",
                    self.settings.retries, self._limit,
                )  # fmt: skip
                self.served = pick_model([m.to_dict() for m in page.data], self.settings)
                self.recorder = self._recorder(self.served)
        return self.served

    def _recorder(self, served: Served) -> Recorder | None:
        if self.settings.record_dir is None:
            return None
        identity = {
            "model_ref": served.model_ref,
            "harness_ref": self.settings.harness_ref,
            "backend_model_digest": served.digest,
            "verifier_digest": self.settings.verifier_digest,
        }
        key_doc = {**identity, "generation": self.settings.generation, "card": served.card}
        text = json.dumps(key_doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        key = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return Recorder(self.settings.record_dir, identity, key)

    async def _ask(
        self,
        task: PublicTask,
        messages: list[JSON],
        repeats: int,
        known: Mapping[Pair, Attempt],
        keep: Keep | None,
    ) -> list[Attempt]:
        """The task's attempts not `known`: one request with `n`, or one per repeat."""
        missing = [r for r in range(repeats) if (task.task_id, r) not in known]
        fresh: list[Attempt] = []
        if len(missing) == repeats and not self.ignores_n:
            fresh = await self._complete(task, messages, repeats, 0, keep)
            if len(fresh) < repeats:
                self.ignores_n = True
            missing = missing[len(fresh) :]
        more = await asyncio.gather(*(self._complete(task, messages, 1, r, keep) for r in missing))
        return fresh + [attempt for one in more for attempt in one]

    async def _complete(
        self, task: PublicTask, messages: list[JSON], n: int, repeat: int, keep: Keep | None
    ) -> list[Attempt]:
        """One chat completion's choices in index order as the attempts of repeats `repeat`,
        `repeat + 1`, ...; kept (when the executor gives `keep`) before its slot is freed."""
        generation = dict(self.settings.generation)
        if "seed" in generation and repeat:
            generation["seed"] = int(generation["seed"]) + repeat
        what = f"task {task.task_id!r}: POST {self.settings.base_url}/chat/completions"
        request = self.client().chat.completions.create

        async def send() -> list[Attempt]:
            answer = await request(
                model=self.settings.model,
                messages=messages,
                n=n,
                **generation,
            )
            choices = read_choices(answer, what)[:n]
            attempts = [
                Attempt(task.task_id, repeat + i, response, reason)
                for i, (response, reason) in enumerate(choices)
            ]
            if keep is not None:
                await keep(attempts)
            return attempts

        return await with_retries(send, what, self.settings.retries, self._limit)

    def _provenance(self, served: Served, context: CalibrationContext) -> dict[str, JSON]:
        """The same for every call of a batch: the served identity, settings and reports."""
        provenance: dict[str, JSON] = {
            "kind": "live_responses",
            "base_url": self.settings.base_url,
            "model_ref": served.model_ref,
            "backend_model_digest": served.digest,
            "model_card": served.card,
            "harness_ref": self.settings.harness_ref,
            "verifier_digest": self.settings.verifier_digest,
            "generation": self.settings.generation,
        }
        if self.recorder is not None:
            provenance["reports"] = self.recorder.provenance(context.batch_index, context.repeats)
        return provenance
