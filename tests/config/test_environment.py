"""The environment and the Pulsar managed-ledger keys: every ``TIEREDSTORE_*``
variable is a key or an error naming it; the offload thresholds, retention and
deletion lag reach :class:`ManagedLedgerConfig` with units; bad input changes
nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.errors.helpers import read_local, seed_local
from tieredstore.config import MiB, load_config
from tieredstore.errors import ConfigError
from tieredstore.ledger import LedgerHost, managed_ledger_config
from tieredstore.objectstore import MemoryObjectStore

DAY = 86400.0


def test_the_offload_threshold_from_the_environment_reaches_the_managed_ledger() -> None:
    """It was silently ignored: only five ledger keys were mapped."""
    config = load_config(env={"TIEREDSTORE_OFFLOAD_THRESHOLD_BYTES": "10MiB"})
    assert config.offload_threshold_bytes == 10 * MiB
    assert managed_ledger_config(config).offload_threshold_bytes == 10 * MiB


def test_the_ledger_keys_from_the_file_with_units(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('[ledger]\noffload_threshold_bytes = "1GiB"\noffload_threshold_time = "2h"\n'
                    'ledger_retention_bytes = "10GiB"\nledger_retention_time = "7d"\n'
                    'ledger_deletion_lag = "30m"\n')
    ml = managed_ledger_config(load_config(conf, env={}))
    assert (ml.offload_threshold_bytes, ml.offload_threshold_seconds) == (1024 * MiB, 7200.0)
    assert (ml.retention_bytes, ml.retention_seconds) == (10 * 1024 * MiB, 7 * DAY)
    assert ml.deletion_lag_seconds == 1800.0
    off = managed_ledger_config(load_config(conf, env={
        "TIEREDSTORE_OFFLOAD_THRESHOLD_BYTES": "off", "TIEREDSTORE_LEDGER_RETENTION_TIME": "OFF"}))
    assert off.offload_threshold_bytes is None and off.retention_seconds is None
    assert off.offload_threshold_seconds == 7200.0
    defaults = managed_ledger_config(load_config(env={}))
    assert (defaults.offload_threshold_bytes, defaults.offload_threshold_seconds,
            defaults.retention_bytes, defaults.retention_seconds) == (None, None, None, None)


@pytest.mark.parametrize(("env", "key", "detail"), [
    ({"OFFLOAD_THRESHOLD_BYTES": "1GiB", "LEDGER_RETENTION_BYTES": "1GiB"},
     "offload_threshold_bytes", "must be below ledger_retention_bytes = 1 GiB, or retention "
                                "deletes ledgers before they are offloaded; got 1 GiB"),
    ({"OFFLOAD_THRESHOLD_TIME": "8d", "LEDGER_RETENTION_TIME": "7d"},
     "offload_threshold_time", "must be below ledger_retention_time = 7 d"),
    ({"OFFLOAD_THRESHOLD_BYTES": "-1"}, "offload_threshold_bytes",
     "must be in [0 B, 1024 TiB] or 'off', got -1 B"),
    ({"OFFLOAD_THRESHOLD_BYTES": "never"}, "offload_threshold_bytes",
     "cannot read 'never' as a size: must be a whole number of bytes, or with a unit: "
     "512KiB, 8MiB, 1GiB (MB, GB, KB are refused as ambiguous), or 'off'"),
    ({"LEDGER_RETENTION_TIME": "30"}, "ledger_retention_time",
     "'30' has no unit: write 30h or 30s"),
    ({"OFFLOAD_THRESHOLD": "1GiB"}, "offload_threshold",
     "TIEREDSTORE_OFFLOAD_THRESHOLD names no key; did you mean 'offload_threshold_time' "
     "(TIEREDSTORE_OFFLOAD_THRESHOLD_TIME)?"),
    ({"OFFLOAD_DELETION_LAG": "4h"}, "offload_deletion_lag",
     "did you mean 'ledger_deletion_lag' (TIEREDSTORE_LEDGER_DELETION_LAG)?"),
])
def test_a_bad_variable_names_the_key_the_value_and_what_is_expected(
        tmp_path: Path, env: dict[str, str], key: str, detail: str) -> None:
    written = seed_local(tmp_path / "data")
    with pytest.raises(ConfigError) as info:
        load_config(env={f"TIEREDSTORE_{k}": v for k, v in env.items()},
                    backend="local", local_path=str(tmp_path / "data"))
    assert info.value.key == key, str(info.value)
    assert detail in str(info.value), str(info.value)
    assert read_local(tmp_path / "data") == written


def test_a_variable_resembling_no_key_is_left_out_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A script's own TIEREDSTORE_HOME must not stop a broker; it is named."""
    with caplog.at_level("WARNING", logger="tieredstore.config.loading"):
        config = load_config(env={"TIEREDSTORE_HOME": "/opt/broker",
                                  "TIEREDSTORE_CHUNK_SIZE": "1MiB"},
                             backend="local", local_path=str(tmp_path / "data"))
    assert config.chunk_size == 1 << 20
    assert "TIEREDSTORE_HOME names no configuration key" in caplog.text, caplog.text


async def test_a_size_trigger_from_the_configuration_offloads_after_rollover(
        tmp_path: Path) -> None:
    config = load_config(env={"TIEREDSTORE_OFFLOAD_THRESHOLD_BYTES": "0",
                              "TIEREDSTORE_LEDGER_MAX_ENTRIES": "3"},
                         backend="memory", local_path=str(tmp_path))
    host = LedgerHost.create(config, MemoryObjectStore(), ledgers=str(tmp_path / "ledgers"))
    try:
        ml = await host.open("orders")
        for i in range(7):  # ledgers 0 and 1 fill (3 entries each) and roll over
            await ml.add_entry(b"entry-%d" % i)
        await ml.wait_idle()
        rows = await host.ledger_rows("orders")
        await ml.close()
    finally:
        await host.close()
    assert [r.ledger_id for r in rows if r.offloaded] == [0, 1], rows
