"""The ``tuplemesh`` data source's options, parsed and validated once (errors name the option)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuplemesh.client import TlsSettings

__all__ = ["OptionError", "Options"]

_TLS_FILES = ("tlsCaFile", "tlsCertFile", "tlsKeyFile")
_KNOWN = {
    "targets", "component", "export", "columns", "batchsize", "timeout", "retries", "sinkid", "token",
    "tlscafile", "tlscertfile", "tlskeyfile", "tlsservername", "maxrecordspertrigger", "startingoffsets",
    "failondataloss",
}  # fmt: skip
#: Spark's own options, which it passes along to every source and sink.
_SPARK_OPTIONS = {"path", "checkpointlocation", "queryname"}


class OptionError(ValueError):
    """A data source option is missing or invalid (the message names it)."""


@dataclass(frozen=True)
class Options:
    targets: tuple[str, ...]
    component: str
    export: str
    columns: tuple[str, ...]
    batch_size: int
    timeout: float
    retries: int
    sink_id: str
    #: how to reach a secured worker: TLS (None: plaintext) and the worker's ``admin.token``
    tls: TlsSettings | None = None
    token: str = ""
    #: reads: most records one micro-batch reads across partitions (0: everything available)
    max_records_per_trigger: int = 0
    #: reads: where a new query starts: "earliest", "latest", or partition -> offset
    starting_offsets: str | Mapping[int, int] = "earliest"
    #: reads: a restarted export log (or records committed away) fails the query instead of
    #: going on from what the log holds now
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str], mode: str) -> Options:
        lowered = {k.lower(): v for k, v in options.items()}
        unknown = sorted(set(lowered) - _KNOWN - _SPARK_OPTIONS)
        if unknown:
            raise OptionError(f"tuplemesh: unknown option(s) {unknown}; known: {sorted(_KNOWN)}")
        targets = tuple(t.strip() for t in lowered.get("targets", "").split(",") if t.strip())
        if not targets:
            raise OptionError(
                "tuplemesh: option 'targets' is required: HOST:PORT of the workers, comma-separated"
            )
        for target in targets:
            host, sep, port = target.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise OptionError(f"tuplemesh: option 'targets' entry {target!r} is not HOST:PORT")
        if mode == "write" and not lowered.get("component"):
            raise OptionError("tuplemesh: writing needs option 'component' (the IngestSpout)")
        if mode == "read" and not lowered.get("export"):
            raise OptionError("tuplemesh: reading needs option 'export' (the ExportBolt)")

        def number(name: str, default: str, kind: type) -> Any:
            text = lowered.get(name.lower(), default)
            try:
                value = kind(text)
            except ValueError:
                raise OptionError(f"tuplemesh: option {name!r} must be a number, got {text!r}") from None
            if (value <= 0 and name != "retries") or value < 0:
                raise OptionError(f"tuplemesh: option {name!r} must be > 0, got {text!r}")
            return value

        return cls(
            targets=targets,
            component=lowered.get("component", ""),
            export=lowered.get("export", ""),
            columns=tuple(c.strip() for c in lowered.get("columns", "").split(",") if c.strip()),
            batch_size=number("batchSize", "1000", int),
            timeout=number("timeout", "60", float),
            retries=number("retries", "5", int),
            sink_id=lowered.get("sinkid", "") or lowered.get("component", ""),
            tls=_tls_settings(lowered),
            token=lowered.get("token", ""),
            max_records_per_trigger=number("maxRecordsPerTrigger", "0", int)
            if "maxrecordspertrigger" in lowered
            else 0,
            starting_offsets=_starting_offsets(lowered.get("startingoffsets", "earliest")),
            fail_on_data_loss=_boolean("failOnDataLoss", lowered.get("failondataloss", "true")),
        )


def _boolean(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"tuplemesh: option {name!r} must be true or false, got {text!r}")
    return value == "true"


def _starting_offsets(text: str) -> str | Mapping[int, int]:
    """``earliest``, ``latest``, or a JSON object of partition -> offset (e.g. ``{"0": 42}``)."""
    if text.strip().lower() in ("earliest", "latest"):
        return text.strip().lower()
    try:
        given = json.loads(text)
        offsets = {int(p): int(o) for p, o in given.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(
            "tuplemesh: option 'startingOffsets' must be earliest, latest or a JSON object of "
            f'partition -> offset like {{"0": 42}}, got {text!r}'
        ) from None
    if any(p < 0 or o < 0 for p, o in offsets.items()):
        raise OptionError(f"tuplemesh: option 'startingOffsets' has a negative partition or offset: {text!r}")
    return offsets


def _tls_settings(lowered: Mapping[str, str]) -> TlsSettings | None:
    """TLS is on when ``tlsCaFile`` is given; a client certificate needs its key and the reverse."""
    given = {name: lowered.get(name.lower(), "") for name in (*_TLS_FILES, "tlsServerName")}
    if not given["tlsCaFile"]:
        stray = sorted(name for name, value in given.items() if value)
        if stray:
            raise OptionError(f"tuplemesh: option(s) {stray} need option 'tlsCaFile' (TLS is off without it)")
        return None
    if bool(given["tlsCertFile"]) != bool(given["tlsKeyFile"]):
        missing = "tlsKeyFile" if given["tlsCertFile"] else "tlsCertFile"
        raise OptionError(
            f"tuplemesh: option {missing!r} is missing: give 'tlsCertFile' and 'tlsKeyFile' together"
        )
    for name in _TLS_FILES:
        path = given[name]
        if path and not Path(path).is_file():
            raise OptionError(f"tuplemesh: option {name!r} names {path!r}, which is not a readable file")
    return TlsSettings(given["tlsCaFile"], given["tlsCertFile"], given["tlsKeyFile"], given["tlsServerName"])
