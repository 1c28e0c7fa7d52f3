"""Per-topic overrides: ``[topics."NAME"]`` tables read and checked as the keys
they override, errors naming the topic's key, code over the file key by key."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tests.errors.helpers import read_local, seed_local
from tieredstore.config import KiB, MiB, TieredStoreConfig, load_config
from tieredstore.errors import ConfigError

TABLES = '''
file_reserved_time = "72h"
[topics."orders"]
file_reserved_time = "7d"
commit_log_max_size = "256MiB"
chunk_size = "16MiB"
[topics.audit]
file_reserved_time = "365d"
'''


def conf(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def test_a_topic_table_overrides_its_keys_for_that_topic_alone(tmp_path: Path) -> None:
    config = load_config(conf(tmp_path, TABLES), env={})
    orders, audit, other = (config.for_topic(t) for t in ("orders", "audit", "other"))
    assert (orders.file_reserved_time, orders.commit_log_max_size, orders.chunk_size) == \
        (7 * 86400, 256 * MiB, 16 * MiB)
    assert (audit.file_reserved_time, audit.commit_log_max_size, audit.chunk_size) == \
        (365 * 86400, config.commit_log_max_size, config.chunk_size)
    assert (other.file_reserved_time, other.commit_log_max_size, other.chunk_size) == \
        (72 * 3600, config.commit_log_max_size, config.chunk_size)
    assert orders.key("chunk_size") == 'topics."orders".chunk_size'
    assert audit.key("chunk_size") == "chunk_size"
    assert pickle.loads(pickle.dumps(config)) == config  # Spark executors carry it
    assert hash(config) == hash(pickle.loads(pickle.dumps(config)))


def test_code_overrides_the_files_tables_key_by_key(tmp_path: Path) -> None:
    config = load_config(conf(tmp_path, TABLES), env={},
                         topics={"orders": {"chunk_size": "4MiB"}, "new": {"chunk_size": 2 * MiB}})
    orders = config.for_topic("orders")
    assert (orders.chunk_size, orders.file_reserved_time) == (4 * MiB, 7 * 86400)
    assert config.for_topic("new").chunk_size == 2 * MiB
    direct = TieredStoreConfig(topics={"orders": {"file_reserved_time": 60.0}})
    assert direct.for_topic("orders").file_reserved_time == 60.0
    assert direct == TieredStoreConfig(topics=direct.topics)


@pytest.mark.parametrize(("text", "key", "detail"), [
    ('[topics."orders"]\nfile_reserved_tme = "7d"\n', 'topics."orders".file_reserved_tme',
     "did you mean 'file_reserved_time'?; a topic's table takes file_reserved_time, "
     "commit_log_max_size, chunk_size"),
    ('[topics."orders"]\npool_bytes = "8MiB"\n', 'topics."orders".pool_bytes',
     "pool_bytes is not set per topic, only at the top level"),
    ('[topics."orders"]\nretention = "7d"\n', 'topics."orders".retention',
     "unknown key; a topic's table takes file_reserved_time"),
    ('[topics."orders"]\nfile_reserved_time = 72\n', 'topics."orders".file_reserved_time',
     'write "72h" or "72s"'),
    ('[topics."orders"]\nchunk_size = "4MB"\n', 'topics."orders".chunk_size',
     "'4MB': MB is ambiguous (10^6 or 2^20 bytes); write 4MiB (4194304 bytes) or 4000000"),
    ('[topics."orders"]\nchunk_size = "4GiB"\n', 'topics."orders".chunk_size',
     "too large for write_mode = 'log'"),
    ('[topics."orders"]\nchunk_size = 4100\n', 'topics."orders".chunk_size',
     "must be a multiple of 1 KiB"),
    ('[topics."orders"]\ncommit_log_max_size = 10\n', 'topics."orders".commit_log_max_size',
     "must be in [1 KiB, 50000 GiB], got 10 B"),
    ('max_message_size = "4MiB"\n[topics."orders"]\ncommit_log_max_size = "1MiB"\n',
     'topics."orders"', "with this topic's overrides, max_message_size 4 MiB cannot fit a "
     "commit-log segment (commit_log_max_size = 1 MiB)"),
    ('[topics."a/b"]\nchunk_size = "4MiB"\n', 'topics."a/b"', "invalid topic 'a/b'"),
    ('[topics."orders"]\nchunk_size = "4MiB"\n[topics."orders".x]\ny = 1\n',
     'topics."orders".x', "a topic's table takes"),
    ('topics = 3\n', "topics", "must be tables of topics"),
    ('[store.topics.orders]\nchunk_size = "4MiB"\n', "topics", "must be a top-level table"),
])
def test_a_bad_topic_table_names_the_topics_key(tmp_path: Path, text: str, key: str,
                                                detail: str) -> None:
    written = seed_local(tmp_path / "data")
    with pytest.raises(ConfigError) as info:
        load_config(conf(tmp_path, text), env={}, backend="local",
                    local_path=str(tmp_path / "data"))
    assert info.value.key == key, str(info.value)
    assert detail in str(info.value), str(info.value)
    assert "\n" not in str(info.value)
    assert read_local(tmp_path / "data") == written


@pytest.mark.parametrize(("topics", "key"), [
    ({"orders": {"chunk_siz": 4096}}, 'topics."orders".chunk_siz'),
    ({"orders": 5}, 'topics."orders"'),
    ({"..": {"chunk_size": 4096}}, 'topics.".."'),
    ("orders", "topics"),
    ({"orders": {"chunk_size": 10}}, 'topics."orders".chunk_size'),
])
def test_bad_topics_from_code_name_the_key(topics: object, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env={}, topics=topics)
    assert info.value.key == key, str(info.value)


def test_topics_are_not_an_environment_variable() -> None:
    with pytest.raises(ConfigError, match=r"TIEREDSTORE_TOPICS: per-topic overrides are set in "
                                          r"the configuration file"):
        load_config(env={"TIEREDSTORE_TOPICS": "orders"})


def test_a_default_max_message_size_fits_a_topics_small_segments(tmp_path: Path) -> None:
    config = load_config(conf(tmp_path, '[topics.t]\ncommit_log_max_size = "64KiB"\n'), env={})
    assert config.max_message_size == 64 * KiB


@pytest.mark.parametrize("table", ['[Topics."audit"]', '[topic."audit"]', "[TOPICS.audit]",
                                   '[store."audit"]', "[Topics]"])
def test_a_topic_table_under_another_name_is_refused_not_read_as_every_topics(
        tmp_path: Path, table: str) -> None:
    """Tables only group keys, one level deep: a topic's table under a misspelled
    name (``[Topics."audit"]``, ``[topic."audit"]``) was flattened into the top
    level, so its 1h retention became every topic's."""
    text = f'{table}\nfile_reserved_time = "1h"\n'
    with pytest.raises(ConfigError) as caught:
        config = load_config(conf(tmp_path, text), env={})
        pytest.fail(f"{table} read: every topic's retention is "
                    f"{config.for_topic('orders').file_reserved_time} s")
    assert "[topics.\"NAME\"]" in str(caught.value), caught.value
