"""Cross-key limits that keep every upload within what one S3 request holds."""

from __future__ import annotations

import pytest

from tieredstore.config import GiB, MiB, load_config
from tieredstore.errors import ConfigError


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
