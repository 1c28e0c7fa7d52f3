"""Cross-key limits that keep every upload within what one S3 request holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tieredstore.config import GiB, MiB, load_config
from tieredstore.config.model import OPEN_AND_COMMIT
from tieredstore.errors import ConfigError
from tieredstore.objectstore import GET_CLASS, PUT_CLASS, LocalObjectStore
from tieredstore.store import AsyncMessageStore


def test_a_chunk_that_could_join_past_one_put_is_refused() -> None:
    """In the log mode a full chunk takes the remainder behind it (under
    direct_commit_size): 3 GiB + 3 GiB would be one 6 GiB PUT, over S3's 5 GiB."""
    with pytest.raises(ConfigError) as info:
        load_config(env={}, backend="memory", chunk_size=3 * GiB, direct_commit_size=3 * GiB,
                    pool_bytes=8 * GiB)
    assert info.value.key == "chunk_size"
    assert "5 GiB" in str(info.value) and "direct_commit_size" in str(info.value), info.value


def test_the_same_sizes_fit_where_nothing_is_joined() -> None:
    """A small direct_commit_size, or the direct mode, joins nothing that large."""
    assert load_config(env={}, backend="memory", chunk_size=3 * GiB,
                       direct_commit_size=5 * MiB, pool_bytes=8 * GiB).chunk_size == 3 * GiB
    assert load_config(env={}, backend="memory", chunk_size=3 * GiB, direct_commit_size=3 * GiB,
                       write_mode="direct", pool_bytes=8 * GiB).chunk_size == 3 * GiB


# --- a request budget must serve an open ----------------------------------------------


@pytest.mark.parametrize(("key", "value", "least"), [
    ("request_put_rate", 0.01, "at least 0.22 "),
    ("request_get_rate", 0.05, "at least 0.084 "),
    ("request_dollars_per_hour", 0.001, "at least 0.0041 "),
])
def test_a_request_budget_that_cannot_serve_an_open_is_refused(key: str, value: float,
                                                              least: str) -> None:
    """Below what an open and one commit send within a minute: an open would wait
    on its budget (0.01 PUT-class requests/s: 30 min)."""
    for given in ({key: value}, {"env": {f"TIEREDSTORE_{key.upper()}": str(value)}}):
        with pytest.raises(ConfigError) as info:
            load_config(**{"env": {}, "backend": "memory", **given})
        assert info.value.key == key
        text = str(info.value)
        assert f"{value:g}" in text and least in text and "an open and one commit" in text, text


def test_a_request_budget_at_the_least_is_taken() -> None:
    config = load_config(env={}, backend="memory", request_put_rate=0.22,
                         request_get_rate=0.084, request_dollars_per_hour=0.0041)
    assert config.request_put_rate == 0.22
    # the direct mode's open reads fewer heads
    assert load_config(env={}, backend="memory", write_mode="direct",
                       request_get_rate=0.017).request_get_rate == 0.017
    with pytest.raises(ConfigError):
        load_config(env={}, backend="memory", request_get_rate=0.017)


@pytest.mark.parametrize("write_mode", ["log", "direct"])
async def test_the_least_budget_counts_no_request_an_open_does_not_send(
        write_mode: str, tmp_path: Path) -> None:
    """The figures behind the least budget (docs/governor.md), against what a
    reopen of a bucket holding one queue and its first commit send."""
    config = load_config(env={}, backend="local", local_path=str(tmp_path), local_fsync=False,
                         write_mode=write_mode)
    store = await AsyncMessageStore.open(config)
    await store.append("t", 0, b"x")
    await store.close()
    backend = LocalObjectStore(tmp_path, fsync=False)
    store = await AsyncMessageStore.open(config, store=backend)
    try:
        await store.append("t", 0, b"y")
        await store.flush()
        sent = backend.metrics.snapshot()["requests"]
    finally:
        await store.close()
    put = sum(n for op, n in sent.items() if op in PUT_CLASS)
    get = sum(n for op, n in sent.items() if op in GET_CLASS)
    figures = OPEN_AND_COMMIT[write_mode]
    assert figures.put <= put and figures.get <= get, sent
