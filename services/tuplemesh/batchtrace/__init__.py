"""OpenTelemetry spans of the batches executors execute and emit (``tuplemesh.execute``,
``tuplemesh.emit``). A feature (tuplemesh.core.feature), built only while tracing is on."""

from tuplemesh.batchtrace.feature import BatchTracing, feature

__all__ = ["BatchTracing", "feature"]
