"""One HTTP request to a model server, retried on the faults a retry can mend.

A connection error, a timeout, a 5xx and a 429 are retried `retries` times with a capped
exponential backoff (a 429's `Retry-After`, in seconds, is honoured up to the cap); then they
surface as `ConnectionError` or `TimeoutError`, both `OSError`s, so the executor's own retries
and checkpoints take over. Any other refusal (400, 401, 404, ...) and an answer that is not
what the API promises are a `CalibrationError` (exit 65): no retry changes them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import openai

from corpus_assets.tasks.calibration import CalibrationError

T = TypeVar("T")
BACKOFF_S = 0.5  # the first wait; doubled each retry
BACKOFF_CAP_S = 30.0  # no wait is longer, Retry-After included


async def with_retries(
    send: Callable[[], Awaitable[T]], what: str, retries: int, limit: asyncio.Semaphore
) -> T:
    """`await send()` holding `limit` while the request is in flight (and while `send` keeps
    its answers, so a slot takes its next request only after that), retried as above."""
    for attempt in range(retries + 1):
        try:
            async with limit:
                return await send()
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status != 429 and status < 500:
                raise CalibrationError(
                    f"{what}: the server answered HTTP {status} ({_message(exc)})"
                ) from None
            fault: OSError = ConnectionError(f"{what}: HTTP {status} ({_message(exc)})")
            wait = retry_after(exc.response.headers.get("retry-after"))
        except openai.APITimeoutError:
            fault, wait = TimeoutError(f"{what}: no answer in time"), None
        except openai.APIConnectionError as exc:
            fault, wait = ConnectionError(f"{what}: {exc.__cause__ or exc}"), None
        except (openai.APIResponseValidationError, ValueError) as exc:
            raise CalibrationError(
                f"{what}: the answer is not what the API promises: {exc}"
            ) from None
        if attempt == retries:
            break
        await asyncio.sleep(backoff(attempt) if wait is None else wait)
    raise fault


def backoff(attempt: int) -> float:
    """The wait before retry `attempt` + 1: 0.5 s doubled each time, jittered, capped."""
    return min(BACKOFF_CAP_S, BACKOFF_S * 2.0**attempt) * random.uniform(0.8, 1.0)


def retry_after(value: str | None) -> float | None:
    """A `Retry-After` header in seconds, capped; None when absent or not a number of seconds."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None or seconds != seconds or seconds < 0:
        return None
    return min(seconds, BACKOFF_CAP_S)


def _message(exc: openai.APIStatusError) -> str:
    """The server's one-line reason, short enough for an error line."""
    text = " ".join(str(exc.message).split())
    return text if len(text) <= 200 else text[:197] + "..."
