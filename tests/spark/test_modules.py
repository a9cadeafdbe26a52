"""The data source's parts that need no Spark session: public names, options, Arrow, channels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tuplemesh.spark
from tuplemesh.client import TlsSettings
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


def test_every_gateway_call_opens_its_channel_through_open_channel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    ca = tmp_path / "ca.pem"
    ca.write_text("a CA")
    opened: list[tuple[str, TlsSettings | None, str, dict[str, Any]]] = []
    closed: list[str] = []

    class Channel:
        def __init__(self, target: str) -> None:
            self.target = target

        def unary_unary(self, *args: Any, **kwargs: Any) -> Any:
            return None

        unary_stream = stream_unary = stream_stream = unary_unary

        def close(self) -> None:
            closed.append(self.target)

    def fake_open(target: str, tls: TlsSettings | None, token: str, options: Any) -> Channel:
        opened.append((target, tls, token, dict(options)))
        return Channel(target)

    monkeypatch.setattr(channel, "open_channel", fake_open)
    opts = Options.parse(
        {"targets": "w0:6700", "export": "e", "token": "s3cret", "tlsCaFile": str(ca), "tlsServerName": "w"},
        "read",
    )
    with pytest.raises(KeyError), channel.gateway(opts, "w0:6700"):
        raise KeyError("a failing call")
    assert opened == [
        (
            "w0:6700",
            TlsSettings(str(ca), "", "", "w"),
            "s3cret",
            {"grpc.max_receive_message_length": 64 << 20},
        )
    ]
    assert closed == ["w0:6700"]  # closed even when the call fails
