"""The data source's parts that need no Spark session: names, options, positions, Arrow, clients."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

import tuplemesh.spark
from tuplemesh.client import ExportOffsets, PartitionOffsets, TlsSettings
from tuplemesh.client.arrow import columns_to_record_batch
from tuplemesh.spark import OptionError, Options, clients, publish, writer
from tuplemesh.spark import positions as positions_module
from tuplemesh.spark.positions import Position


def test_public_names():
    assert sorted(tuplemesh.spark.__all__) == [
        "ExportRange",
        "OptionError",
        "Options",
        "PublishCommit",
        "TuplemeshDataSource",
        "TuplemeshReader",
        "TuplemeshStreamReader",
        "TuplemeshStreamWriter",
        "TuplemeshWriter",
        "local_session",
        "register",
    ]
    assert all(hasattr(tuplemesh.spark, name) for name in tuplemesh.spark.__all__)


def test_options_defaults_and_spark_own_options():
    opts = Options.parse({"Targets": "a:1, b:2", "export": "counts", "checkpointLocation": "/tmp/x"}, "read")
    assert opts == Options(("a:1", "b:2"), "", "counts", (), 1000, 60.0, 5, "")
    writing = Options.parse({"targets": "a:1", "component": "lines", "retries": "0"}, "write")
    assert (writing.retries, writing.sink_id) == (0, "lines")  # the sink id defaults to the component


def test_options_errors_name_the_option():
    with pytest.raises(OptionError, match=r"unknown option\(s\) \['bogus'\]"):
        Options.parse({"targets": "a:1", "export": "e", "bogus": "1"}, "read")
    with pytest.raises(OptionError, match="reading needs option 'export'"):
        Options.parse({"targets": "a:1"}, "read")
    with pytest.raises(OptionError, match="option 'timeout' must be > 0"):
        Options.parse({"targets": "a:1", "export": "e", "timeout": "0"}, "read")


def test_tls_and_token_options(tmp_path: Path):
    for name in ("ca.pem", "client.crt", "client.key"):
        (tmp_path / name).write_text(name)
    base = {"targets": "a:1", "export": "e"}
    assert Options.parse(base, "read").tls is None  # plaintext unless tlsCaFile is given
    opts = Options.parse(
        {**base, "token": "s3cret", "tlsCaFile": str(tmp_path / "ca.pem"),
         "tlsCertFile": str(tmp_path / "client.crt"), "tlsKeyFile": str(tmp_path / "client.key"),
         "tlsServerName": "worker-0"},
        "read",
    )  # fmt: skip
    assert opts.token == "s3cret"
    assert opts.tls == TlsSettings(
        str(tmp_path / "ca.pem"), str(tmp_path / "client.crt"), str(tmp_path / "client.key"), "worker-0"
    )
    server_only = Options.parse({**base, "TLSCAFILE": str(tmp_path / "ca.pem")}, "read")
    assert server_only.tls == TlsSettings(str(tmp_path / "ca.pem"))  # no client certificate


@pytest.mark.parametrize(
    ("tls", "message"),
    [
        (
            {"tlsCertFile": "client.crt", "tlsKeyFile": "client.key"},
            r"\['tlsCertFile', 'tlsKeyFile'\] need option 'tlsCaFile'",
        ),
        ({"tlsServerName": "w"}, r"\['tlsServerName'\] need option 'tlsCaFile'"),
        ({"tlsCaFile": "ca.pem", "tlsCertFile": "client.crt"}, "option 'tlsKeyFile' is missing"),
        ({"tlsCaFile": "ca.pem", "tlsKeyFile": "client.key"}, "option 'tlsCertFile' is missing"),
        (
            {"tlsCaFile": "nowhere.pem"},
            "option 'tlsCaFile' names '.*nowhere.pem', which is not a readable file",
        ),
        (
            {"tlsCaFile": "ca.pem", "tlsCertFile": "client.crt", "tlsKeyFile": "gone.key"},
            "option 'tlsKeyFile' names '.*gone.key', which is not a readable file",
        ),
    ],
)
def test_tls_option_errors_name_the_option(tmp_path: Path, tls: dict[str, str], message: str):
    for name in ("ca.pem", "client.crt", "client.key"):
        (tmp_path / name).write_text(name)
    given = {key: value if key == "tlsServerName" else str(tmp_path / value) for key, value in tls.items()}
    with pytest.raises(OptionError, match=message):
        Options.parse({"targets": "a:1", "export": "e", **given}, "read")


def test_columns_become_one_arrow_batch_in_the_schema():
    schema = pa.schema([("word", pa.string()), ("count", pa.int64())])
    batch = columns_to_record_batch([["cow", "fox"], [2, 1]], 2, schema, "counts")
    assert batch.schema == schema and batch.to_pylist() == [
        {"word": "cow", "count": 2},
        {"word": "fox", "count": 1},
    ]
    assert columns_to_record_batch([], 0, schema, "counts").num_rows == 0  # an empty fetch: no columns
    with pytest.raises(RuntimeError, match="records of 'counts' have 3 fields, schema 2"):
        columns_to_record_batch([["cow"], [2], ["extra"]], 1, schema, "counts")
    with pytest.raises(RuntimeError, match="columns of 'counts' are not all 2 records long"):
        columns_to_record_batch([["cow", "fox"], [2]], 2, schema, "counts")


def test_one_client_per_process_and_settings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(clients, "_clients", {})
    opts = Options.parse({"targets": "w0:6700,w1:6700", "export": "e", "token": "s3cret"}, "read")
    client = clients.client_for(opts)
    assert clients.client_for(Options.parse({"targets": "w0:6700,w1:6700", "export": "other",
                                             "token": "s3cret"}, "read")) is client  # fmt: skip
    assert (client.targets, client.token, client.timeout, client.retries) == (
        ("w0:6700", "w1:6700"),
        "s3cret",
        60,
        5,
    )
    other = clients.client_for(
        Options.parse({"targets": "w0:6700,w1:6700", "export": "e", "token": "x"}, "read")
    )
    assert other is not client
    client.close()
    assert clients.client_for(opts) is not client  # a closed client is replaced


def test_read_options_limits_start_and_data_loss():
    base = {"targets": "a:1", "export": "e"}
    opts = Options.parse(base, "read")
    assert (opts.max_records_per_trigger, opts.starting_offsets, opts.fail_on_data_loss) == (
        0,
        "earliest",
        True,
    )
    opts = Options.parse(
        {**base, "maxRecordsPerTrigger": "500", "startingOffsets": "LATEST", "failOnDataLoss": "False"},
        "read",
    )
    assert (opts.max_records_per_trigger, opts.starting_offsets, opts.fail_on_data_loss) == (
        500,
        "latest",
        False,
    )
    assert Options.parse({**base, "startingOffsets": '{"0": 42, "1": 0}'}, "read").starting_offsets == {
        0: 42,
        1: 0,
    }
    for key, value, message in [
        ("maxRecordsPerTrigger", "0", "option 'maxRecordsPerTrigger' must be > 0"),
        ("failOnDataLoss", "maybe", "option 'failOnDataLoss' must be true or false"),
        ("startingOffsets", "middle", "option 'startingOffsets' must be earliest, latest or a JSON object"),
        ("startingOffsets", '{"0": -1}', "option 'startingOffsets' has a negative partition or offset"),
    ]:
        with pytest.raises(OptionError, match=re.escape(message)):
            Options.parse({**base, key: value}, "read")


def offsets_now(**partitions: tuple[int, int, int]) -> ExportOffsets:
    """ExportOffsets with partitions p0, p1, ... given as (epoch, start, end)."""
    return ExportOffsets(
        "counts",
        {int(p[1:]): PartitionOffsets(int(p[1:]), "w0:1", e, s, n) for p, (e, s, n) in partitions.items()},
        ("word",),
        "word STRING",
    )


def test_positions_round_trip_through_spark_offsets():
    positions = {0: Position(7, 40), 1: Position(9, 0)}
    assert positions_module.to_spark(positions) == {
        "0": {"epoch": 7, "offset": 40},
        "1": {"epoch": 9, "offset": 0},
    }
    assert positions_module.from_spark(positions_module.to_spark(positions)) == positions
    assert positions_module.from_spark({"0": 12}) == {0: Position(0, 12)}  # before epochs: epoch unknown
    assert positions_module.from_spark(None) == {}


def test_reconcile_keeps_positions_in_the_same_log_and_starts_new_partitions_at_their_start():
    now = offsets_now(p0=(7, 10, 50), p1=(9, 0, 5))
    assert positions_module.reconcile("counts", {0: Position(7, 30)}, now, True) == {
        0: Position(7, 30),
        1: Position(9, 0),
    }
    assert positions_module.reconcile("counts", {0: Position(0, 30)}, now, True)[0] == Position(7, 30)


def test_a_log_restarted_at_0_below_the_checkpoint_is_data_loss(caplog: pytest.LogCaptureFixture):
    now = offsets_now(p0=(8, 0, 5))  # the worker restarted: a new log, 5 records, below offset 40
    with pytest.raises(positions_module.DataLossError) as err:
        positions_module.reconcile("counts", {0: Position(7, 40)}, now, True)
    assert "query's offset 40 belongs to log epoch 7, the log now has epoch 8" in str(err.value)
    assert "'failOnDataLoss' to false" in str(err.value)
    with caplog.at_level(logging.WARNING, logger="tuplemesh.spark.positions"):
        assert positions_module.reconcile("counts", {0: Position(7, 40)}, now, False) == {0: Position(8, 0)}
    assert "log epoch 7, the log now has epoch 8" in caplog.text and "going on from offset 0" in caplog.text


def test_records_committed_away_before_they_were_read_are_data_loss():
    now = offsets_now(p0=(7, 25, 50))
    with pytest.raises(
        positions_module.DataLossError, match=re.escape("records [10, 25) were committed away")
    ):
        positions_module.reconcile("counts", {0: Position(7, 10)}, now, True)
    assert positions_module.reconcile("counts", {0: Position(7, 10)}, now, False) == {0: Position(7, 25)}


def test_cap_rows_shares_the_budget_fairly():
    cap = positions_module.cap_rows
    assert cap({0: 0, 1: 0}, {0: 100, 1: 100}, 50) == {0: 25, 1: 25}
    assert cap({0: 0, 1: 0}, {0: 3, 1: 100}, 50) == {0: 3, 1: 47}  # a share one cannot use goes to the other
    assert cap({0: 10, 1: 0}, {0: 10, 1: 4}, 50) == {0: 10, 1: 4}  # less than the budget: everything
    assert sum(cap({0: 0, 1: 0, 2: 0}, {0: 9, 1: 9, 2: 9}, 10).values()) == 10


def test_micro_batch_ids_and_overwrite_is_refused():
    assert writer.micro_batch_id("lines", "q-1", "4") == "lines:q-1:4"
    assert writer.micro_batch_id("lines", None, "4") == "lines:-:4"
    schema = StructType([StructField("line", StringType())])
    options = {"targets": "a:1", "component": "lines"}
    with pytest.raises(OptionError, match=re.escape("mode('overwrite') cannot replace")):
        writer.TuplemeshWriter(options, schema, overwrite=True)
    with pytest.raises(OptionError, match=re.escape("outputMode('complete') cannot replace")):
        writer.TuplemeshStreamWriter(options, schema, overwrite=True)
    assert writer.TuplemeshWriter(options, schema).indices == [0]


def test_arrow_batches_become_the_chosen_columns_without_rows():
    batches = [
        pa.record_batch({"word": ["cow", "fox"], "count": [2, 1], "note": ["a", "b"]}),
        pa.record_batch({"word": ["owl"], "count": [7], "note": ["c"]}),
    ]
    assert list(publish.arrow_columns(iter(batches), [1, 0])) == [[[2, 1], ["cow", "fox"]], [[7], ["owl"]]]
    assert list(publish.arrow_columns(iter([]), [0])) == []
