"""`WindowSpec`: what a windowed bolt's windows are (length, slide, time), validated once."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Count", "Duration", "WindowSpec"]


@dataclass(frozen=True)
class Count:
    """A window length or slide in tuples."""

    n: int

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"Count needs an integer >= 1, got {self.n!r}")


@dataclass(frozen=True)
class Duration:
    """A window length or slide in seconds (of event time when the bolt has a timestamp field)."""

    seconds: float

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, int | float) or self.seconds <= 0:
            raise ValueError(f"Duration needs seconds > 0, got {self.seconds!r}")


@dataclass(frozen=True)
class WindowSpec:
    """Storm's window configuration (``withWindow``, ``withTumblingWindow``,
    ``withTimestampField``, ``withLag``, ``withWatermarkInterval``, ``withLateTupleStream``)."""

    length: Count | Duration
    #: how far apart windows start; equal to ``length``: tumbling windows
    slide: Count | Duration
    #: the field holding each tuple's event time (seconds); None: processing time
    timestamp_field: str | None = None
    #: event time: how far behind the newest timestamp of an input task its watermark stays
    lag: float = 0.0
    #: event time: how often watermarks are sent downstream (seconds of processing time)
    watermark_interval: float = 1.0
    #: event time: the stream late tuples are emitted on
    late_stream: str = "late"
    #: event time: an input task silent this long (seconds) stops holding the watermark back
    #: until it sends again; None: a silent input holds it back for ever (Flink's default)
    idle_timeout: float | None = None

    def __post_init__(self) -> None:
        if type(self.length) is not type(self.slide):
            raise ValueError(
                f"window length {self.length} and slide {self.slide} must both be Count or both Duration"
            )
        if self.slide_size > self.length_size:
            raise ValueError(f"window slide {self.slide} is longer than its length {self.length}")
        if isinstance(self.length, Duration):
            span = round(self.length_size / self.slide_size)
            if abs(span * self.slide_size - self.length_size) > 1e-9 * self.length_size:
                raise ValueError(f"window length {self.length} must be a whole number of slides {self.slide}")
        if self.lag < 0:
            raise ValueError(f"lag must be >= 0 seconds, got {self.lag!r}")
        if self.watermark_interval <= 0:
            raise ValueError(f"watermark_interval must be > 0 seconds, got {self.watermark_interval!r}")
        if self.idle_timeout is not None and self.idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be > 0 seconds or None, got {self.idle_timeout!r}")
        if not self.late_stream or self.late_stream.startswith("__"):
            raise ValueError(
                f"late_stream must be a stream name not starting with '__', got {self.late_stream!r}"
            )

    @property
    def by_count(self) -> bool:
        return isinstance(self.length, Count)

    @property
    def event_time(self) -> bool:
        return self.timestamp_field is not None

    @property
    def tumbling(self) -> bool:
        return self.length == self.slide

    @property
    def length_size(self) -> float:
        return self.length.n if isinstance(self.length, Count) else self.length.seconds

    @property
    def slide_size(self) -> float:
        return self.slide.n if isinstance(self.slide, Count) else self.slide.seconds
