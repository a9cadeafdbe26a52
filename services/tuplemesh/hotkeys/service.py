"""Admin/HotKeys: a worker's hot keys as its hot-keys feature counts them, a call the feature adds
to the worker's Admin service (declared in ``tuplemesh.hotkeys.v1.Admin``; the same TLS, bearer
token and call admission apply)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import grpc
from google.protobuf import json_format

from tuplemesh.hotkeys.settings import ADMIN_KEY, ENABLED_KEY
from tuplemesh.hotkeys.v1 import hotkeys_pb2

__all__ = ["DECLARED", "HOT_KEYS", "HotKeysService", "hot_keys_message"]

#: The calls the feature adds to Admin, as its proto declares them, and the one it adds.
DECLARED = hotkeys_pb2.DESCRIPTOR.services_by_name["Admin"]
HOT_KEYS = DECLARED.methods_by_name["HotKeys"]


def hot_keys_message(worker: int, section: Mapping[str, Any]) -> hotkeys_pb2.HotKeysResponse:
    """The feature's snapshot section as the service answers it (the section has the response's
    shape: its fields are the message's); the web UI merges the same messages."""
    return json_format.ParseDict({"worker": worker, **section}, hotkeys_pb2.HotKeysResponse())


class HotKeysService:
    """``HotKeys``: the hot keys of worker ``worker``, read from ``section`` on each call; refused
    (PERMISSION_DENIED) unless ``allowed`` (keys are user data), and (FAILED_PRECONDITION) while
    keys are not ``counting``."""

    def __init__(
        self, worker: int, section: Callable[[], Mapping[str, Any]], *, allowed: bool, counting: bool
    ) -> None:
        self._worker, self._section = worker, section
        self._allowed, self._counting = allowed, counting

    def HotKeys(
        self, request: hotkeys_pb2.HotKeysRequest, context: grpc.ServicerContext
    ) -> hotkeys_pb2.HotKeysResponse:
        if not self._allowed:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"Admin/HotKeys is off: set {ADMIN_KEY}: true")
        if not self._counting:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, f"hot keys are not counted: set {ENABLED_KEY}: true"
            )
        section = dict(self._section())
        if request.component:
            section["streams"] = [s for s in section["streams"] if s["component"] == request.component]
            if not section["streams"]:
                context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"component {request.component!r} has no fields-grouped input on worker {self._worker}",
                )
        return hot_keys_message(self._worker, section)
