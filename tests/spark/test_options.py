"""An option no format (nor ``tieredstore spark``) knows is an error naming it and
the known option it most resembles, before anything is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import BuiltStore
from tieredstore.cli import main as cli_main
from tieredstore.errors import ConfigError
from tieredstore.spark import LEDGER_SCHEMA, TieredStoreLedgerDataSource, bind
from tieredstore.spark.options import config_from_options

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize(("option", "meant"), [
    ("topik", "topic"), ("queue", "queue_id"), ("Offset_Form", "offset_from"),
    ("bucekt", "bucket"), ("chunk_sise", "chunk_size"), ("messages_per_partiton",
                                                          "messages_per_partition"),
])
def test_a_mistyped_option_is_refused_with_the_closest_known_one(
        spark: Any, merged_store: BuiltStore, option: str, meant: str) -> None:
    with pytest.raises(Exception, match=rf"'{option.lower()}': unknown option; did you mean "
                                        rf"'{meant}'\?"):
        spark.read.format("tieredstore").options(**merged_store.options) \
            .option(option, "1").load().collect()


def test_a_bound_format_names_a_mistyped_option_too(spark: Any,
                                                     merged_store: BuiltStore) -> None:
    name = bind(spark, merged_store.config)
    with pytest.raises(Exception, match=r"'topik': unknown option; did you mean 'topic'\?"):
        spark.read.format(name).option("topik", "orders").load().collect()


def test_an_option_like_none_lists_the_options(merged_store: BuiltStore) -> None:
    source = TieredStoreLedgerDataSource({**merged_store.options, "ledger_idd": "1"})
    with pytest.raises(ConfigError, match=r"did you mean 'ledger_id'\?") as raised:
        source.reader(LEDGER_SCHEMA)
    assert raised.value.key == "ledger_idd"
    source = TieredStoreLedgerDataSource({**merged_store.options, "zzzqqq": "1"})
    with pytest.raises(ConfigError, match="unknown option; the options are the config keys"):
        source.reader(LEDGER_SCHEMA)


def test_the_spark_command_refuses_a_mistyped_option(merged_store: BuiltStore,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = str(merged_store.path)
    assert cli_main(["spark", "stats", "--data-dir", path, "--option", "topik=orders"]) == 2
    assert "'topik': unknown option; did you mean 'topic'?" in capsys.readouterr().err
    # the jobs select with their flags: an --option that would select is refused
    assert cli_main(["spark", "stats", "--data-dir", path, "--option", "topic=orders"]) == 2
    assert "select with --topic and --queue" in capsys.readouterr().err


def test_the_reader_resolves_the_drivers_chain_credentials_into_its_config(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What the executors get with the reader (or a job's task): the credentials
    resolved where the options are (docs/spark-shipping.md, "Credentials"); keys
    given as options (``session_token`` too) win."""
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADRIVER")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "driver-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "driver-token")
    config = config_from_options({"backend": "s3", "bucket": "b"})
    assert (config.s3_access_key_id, config.s3_secret_access_key, config.s3_session_token) == (
        "AKIADRIVER", "driver-secret", "driver-token")
    given = config_from_options({"backend": "s3", "bucket": "b", "access_key_id": "AKIAGIVEN",
                                 "secret_access_key": "given", "session_token": "given-token"})
    assert (given.s3_access_key_id, given.s3_session_token) == ("AKIAGIVEN", "given-token")
