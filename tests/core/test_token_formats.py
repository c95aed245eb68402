"""The framework formats' small files: Megatron's `.idx` layout (golden bytes), datatrove's
`.ds.metadata` count (equal to `humanize.metric`, which datatrove calls, for every count)."""

from __future__ import annotations

import struct

import humanize
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from corpus_assets.core.errors import DataError
from corpus_assets.core.stages.token_formats import (
    file_names,
    megatron_index,
    metric,
    nanotron_metadata,
)


def test_megatron_index_golden() -> None:
    ends = np.array([3, 5, 9], dtype="<u8")
    got = b"".join(megatron_index(ends, 4))
    assert got == (
        b"MMIDIDX\x00\x00"
        + struct.pack("<Q", 1)
        + bytes([4])  # int32 tokens
        + struct.pack("<QQ", 3, 4)  # sequences, documents + 1
        + struct.pack("<3i", 3, 2, 4)  # lengths
        + struct.pack("<3q", 0, 12, 20)  # byte offsets of each sequence
        + struct.pack("<4q", 0, 1, 2, 3)  # document indices
    )
    empty = b"".join(megatron_index(np.zeros(0, dtype="<u8"), 2))
    assert empty == b"MMIDIDX\x00\x00" + struct.pack("<QBQQq", 1, 8, 0, 1, 0)


def test_a_document_too_long_for_int32_lengths_is_refused() -> None:
    with pytest.raises(DataError, match="does not fit Megatron's int32 sequence length"):
        b"".join(megatron_index(np.array([2**31], dtype="<u8"), 2))


def test_file_names_are_datatrove_s() -> None:
    assert file_names("megatron", 7) == ("00007_tokens.bin", "00007_tokens.idx")
    assert file_names("nanotron", 12) == (
        "00012_unshuffled.ds",
        "00012_unshuffled.ds.index",
        "00012_unshuffled.ds.metadata",
    )
    assert nanotron_metadata("gpt2", 2, 119_280) == b"gpt2|2\n119280\n119 kT"


@pytest.mark.parametrize(
    "count", [0, 1, 9, 10, 999, 1_000, 9_995, 9_999, 99_950, 999_499, 999_500, 10**30 - 1]
)
def test_metric_at_the_edges(count: int) -> None:
    assert metric(count, "T") == humanize.metric(count, unit="T")


@given(st.integers(min_value=0, max_value=10**32))
def test_metric_is_humanize_s(count: int) -> None:
    assert metric(count, "T") == humanize.metric(count, unit="T")
