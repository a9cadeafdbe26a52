"""The public names of ``tuplemesh.client``, pinned."""

from __future__ import annotations

import tuplemesh.client
from tuplemesh import errors


def test_public_names():
    assert sorted(tuplemesh.client.__all__) == [
        "EpochMismatchError",
        "ExportOffsets",
        "Fetched",
        "FetchedBatch",
        "FetchedColumns",
        "GatewayClient",
        "GatewayError",
        "PartitionOffsets",
        "PublishResult",
        "Record",
        "TlsSettings",
        "open_channel",
        "open_channel_from_config",
        "peer_channel",
    ]
    assert all(hasattr(tuplemesh.client, name) for name in tuplemesh.client.__all__)


def test_gateway_errors_are_in_the_one_tree():
    assert issubclass(errors.EpochMismatchError, errors.GatewayError)
    assert issubclass(errors.GatewayError, errors.TuplemeshError)
    err = errors.EpochMismatchError("counts", 1, 7, 8, "w0:6700")
    assert (err.code, err.target, err.reader_epoch, err.log_epoch) == ("FAILED_PRECONDITION", "w0:6700", 7, 8)
    assert "partition 1 of export 'counts'" in str(err) and "epoch 7" in str(err) and "epoch 8" in str(err)
