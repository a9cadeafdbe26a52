"""The ``tuplemesh`` data source's options, parsed and validated once (errors name the option)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OptionError", "Options"]

_KNOWN = {"targets", "component", "export", "columns", "batchsize", "timeout", "retries", "sinkid"}
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
        )
