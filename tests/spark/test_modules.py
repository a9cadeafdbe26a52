"""The data source's parts that need no Spark session: public names, options, Arrow, channels."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import tuplemesh.spark
from tuplemesh.spark import OptionError, Options, channel
from tuplemesh.spark.arrow import to_record_batch


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


def test_records_become_one_arrow_batch_in_the_schema():
    schema = pa.schema([("word", pa.string()), ("count", pa.int64())])
    batch = to_record_batch([["cow", 2], ["fox", 1]], schema, "counts")
    assert batch.schema == schema and batch.to_pylist() == [
        {"word": "cow", "count": 2},
        {"word": "fox", "count": 1},
    ]
    assert to_record_batch([], schema, "counts").num_rows == 0
    with pytest.raises(RuntimeError, match="records of 'counts' have 3 fields, schema 2"):
        to_record_batch([["cow", 2, "extra"]], schema, "counts")


def test_every_gateway_call_opens_its_channel_through_open_channel(monkeypatch: pytest.MonkeyPatch):
    opened: list[str] = []
    closed: list[str] = []

    class Channel:
        def __init__(self, target: str) -> None:
            self.target = target

        def unary_unary(self, *args: Any, **kwargs: Any) -> Any:
            return None

        unary_stream = stream_unary = stream_stream = unary_unary

        def close(self) -> None:
            closed.append(self.target)

    def fake_open(target: str) -> Channel:
        opened.append(target)
        return Channel(target)

    monkeypatch.setattr(channel, "open_channel", fake_open)
    with pytest.raises(KeyError), channel.gateway("w0:6700"):
        raise KeyError("a failing call")
    assert opened == closed == ["w0:6700"]  # closed even when the call fails
