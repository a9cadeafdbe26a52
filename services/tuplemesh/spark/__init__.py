"""PySpark Python Data Source ``tuplemesh``: Spark reads from and writes to running topologies.

Register it once per session with ``register(spark)``, then::

    df.write.format("tuplemesh").option("targets", "host:6700,...").option("component", "lines").save()
    df.writeStream.format("tuplemesh").option("targets", ...).option("component", "lines")...
    spark.read.format("tuplemesh").option("targets", ...).option("export", "counts").load()
    spark.readStream.format("tuplemesh").option("targets", ...).option("export", "counts").load()

Writing: every Spark partition (Arrow record batches) publishes its rows through
``tuplemesh.client.GatewayClient`` in requests of ``batchSize`` rows, and its task ends only
when every request is acknowledged,
that is, its rows are held (with acking on: their tuple trees completed). Requests carry (batch,
partition, sequence) ids: a streaming micro-batch is ``<sinkId>:<query id>:<batch id>``, the
same when Spark runs the batch again from its checkpoint, so the worker that holds the rows
recognises the replay and publishes nothing twice.

Reading: partitions are the export bolt's partitions; offsets are (log epoch, offset) per
partition, so a log that restarted (its worker did) is never read with offsets of the old one:
that is data loss, an error unless ``failOnDataLoss`` is false. A micro-batch reads its ranges
with ``Fetch``, at most ``maxRecordsPerTrigger`` records; ``commit`` lets the export log truncate.
``Trigger.AvailableNow`` reads what exists when the query starts, then stops. The schema comes
from the export bolt.

Options: ``targets`` (required), ``component`` (writes), ``export`` (reads), ``columns`` (writes:
which columns, in order; default all), ``batchSize`` (rows per request or fetch), ``timeout``
(seconds per call), ``retries``, ``sinkId`` (streaming writes), ``startingOffsets``,
``maxRecordsPerTrigger`` and ``failOnDataLoss`` (reads), and for a secured mesh ``token``,
``tlsCaFile``, ``tlsCertFile``, ``tlsKeyFile``, ``tlsServerName``. A wrong option is an error
naming it.

Modules: ``options`` (parsing), ``clients`` (one Gateway client per process), ``publish`` and
``writer`` (the sink), ``positions`` (offsets and data loss), ``fetch``, ``arrow`` and ``reader``
(the source), ``source`` (the data source and ``register``), ``session`` (``local_session``).
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
