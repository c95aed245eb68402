"""The OpenAI-compatible chat API's shapes: the served model, a completion's choices, messages."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corpus_assets.calibrators.settings import Settings
from corpus_assets.tasks.calibration import CalibrationError
from corpus_assets.tasks.types import JSON, PublicTask

FAILED = ("length", "content_filter")  # finish reasons that are the model's, not the server's
DIGEST_KEYS = ("digest", "sha256", "model_digest", "checksum")
CARD_KEYS = ("id", "root", "parent", "owned_by", "max_model_len")  # stable fields of a model card


@dataclass
class Served:
    """What `GET /v1/models` said of the served model."""

    model_ref: str
    digest: str
    card: dict[str, JSON] = field(default_factory=dict)


def pick_model(cards: Sequence[Mapping[str, Any]], settings: Settings) -> Served:
    """The served model named `settings.model`, else CalibrationError naming what is served."""
    for card in cards:
        if card.get("id") == settings.model:
            digest = next(
                (str(card[k]) for k in DIGEST_KEYS if isinstance(card.get(k), str) and card[k]),
                "unreported",
            )
            kept = {k: card[k] for k in CARD_KEYS if isinstance(card.get(k), str | int)}
            return Served(settings.model, digest, kept)
    served = ", ".join(repr(c.get("id")) for c in cards) or "nothing"
    raise CalibrationError(
        f"live_responses: the server at {settings.base_url} serves {served}, not "
        f"{settings.model!r} (calibration.params.model)"
    )


def read_choices(answer: Any, what: str) -> list[tuple[JSON, str | None]]:
    """The choices of a chat completion by index: content and the model's failure reason."""
    choices = getattr(answer, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise CalibrationError(f"{what}: the answer has no choices")
    found = []
    for choice in sorted(choices, key=lambda c: getattr(c, "index", 0) or 0):
        content = getattr(getattr(choice, "message", None), "content", None)
        if content is not None and not isinstance(content, str):
            raise CalibrationError(f"{what}: a choice's content is not a string")
        reason = getattr(choice, "finish_reason", None)
        found.append((content, reason if reason in FAILED else None))
    return found


def default_messages(task: PublicTask) -> JSON:
    """A string `input` as one user message; a list of chat messages as it is."""
    if isinstance(task.input, str):
        return [{"role": "user", "content": task.input}]
    return task.input


def messages_of(prompt: Callable[[PublicTask], JSON], task: PublicTask) -> list[JSON]:
    """The chat messages of `task`, checked: a non-empty list of {role, content} strings."""
    messages = prompt(task)
    if (
        not isinstance(messages, list)
        or not messages
        or not all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
            for m in messages
        )
    ):
        raise CalibrationError(
            f"live_responses: task {task.task_id!r} gives no chat messages (a list of "
            "{role, content} strings): give the recipe a prompt(task) method, or tasks whose "
            "input is a string or such a list"
        )
    return messages
