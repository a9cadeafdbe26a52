"""PySpark Python Data Source ``tuplemesh``: Spark reads from and writes to running topologies.

Register it once per session with ``register(spark)``, then::

    df.write.format("tuplemesh").option("targets", "host:6700,...").option("component", "lines").save()
    df.writeStream.format("tuplemesh").option("targets", ...).option("component", "lines")...
    spark.read.format("tuplemesh").option("targets", ...).option("export", "counts").load()
    spark.readStream.format("tuplemesh").option("targets", ...).option("export", "counts").load()

Writing: every Spark partition streams its rows to Gateway ``Publish`` on one worker, in
requests of ``batchSize`` rows, and its task ends only when every request is acknowledged (the
rows are in the topology). A failed task is retried by Spark with the same (batch, partition,
sequence) identifiers, so the Gateway recognises what it already accepted; a streaming micro-batch
uses ``<sinkId>:<batchId>``, so a batch Spark replays after a restart is recognised too
(at-least-once; rows accepted by a worker that then died are sent again and counted).

Reading: partitions are the export bolt's partitions; offsets are per partition; a micro-batch
reads its ranges with ``Fetch`` and ``commit`` lets the export log truncate. ``Trigger.AvailableNow``
reads what exists when the query starts, then stops. The schema comes from the export bolt.

Options: ``targets`` (required), ``component`` (writes), ``export`` (reads), ``columns`` (writes:
which columns, in order; default all), ``batchSize`` (rows per request or fetch), ``timeout``
(seconds per call), ``retries`` (writes), ``sinkId`` (streaming writes), and for a secured mesh
``token``, ``tlsCaFile``, ``tlsCertFile``, ``tlsKeyFile``, ``tlsServerName``. A wrong option is
an error naming it.

Modules: ``options`` (parsing), ``channel`` (reaching a Gateway), ``publish`` and ``writer``
(the sink), ``fetch``, ``arrow`` and ``reader`` (the source), ``source`` (the data source and
``register``), ``session`` (``local_session``).
"""

from tuplemesh.spark.fetch import ExportRange
from tuplemesh.spark.options import OptionError, Options
from tuplemesh.spark.publish import PublishCommit
from tuplemesh.spark.reader import TuplemeshReader, TuplemeshStreamReader
from tuplemesh.spark.session import local_session
from tuplemesh.spark.source import TuplemeshDataSource, register
from tuplemesh.spark.writer import TuplemeshStreamWriter, TuplemeshWriter

__all__ = [
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
