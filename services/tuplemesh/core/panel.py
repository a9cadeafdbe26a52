"""`MeshPanel`: what a feature shows on the web UI of a mesh (a worker's ``/ui/`` and
``tuplemesh ui``), declared in the feature's own package (``FeatureSpec.panel``).

The UI knows no feature: for each panel it asks every worker shown for the panel's *answer*
(the worker serving the page reads its own from the feature's running part, ``local``; a peer's,
and every worker ``tuplemesh ui`` follows, through the feature's own gRPC call, ``ask``), merges
the answers into one entry per component (``merge``), and puts each under the panel's ``name`` in
that component of the view. The page loads the panel's script and style beside its own, and the
script draws the entries (a section of its own, and optionally a badge under each component's
node of the graph: see ``tuplemeshUi.registerPanel`` in the page's app.js).

A worker that refuses the call (the call is off there, the feature has nothing to show, an older
release) gives no answer, and the page shows no entry from it. A worker's own page asks its peers
on every refresh, and only for the panels ``shown`` by its configuration (the mesh shares it);
``tuplemesh ui``, which has no worker's configuration, asks every worker for every panel and
asks one that refused (PERMISSION_DENIED, FAILED_PRECONDITION, UNIMPLEMENTED) again only once
its stats stream breaks and comes back. Answers are opaque to the UI: whatever ``ask``'s future
returns and ``local`` returns, the same kind for both, is what ``merge`` takes. The page keeps
working when a panel's code fails: a failing ``merge`` is logged and its entries left out, and
the page's script reports a failing panel script in the browser's console.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import grpc

    from tuplemesh.core.feature import Feature

__all__ = ["MeshPanel"]


class MeshPanel(Protocol):
    """What one feature shows on the web UI (see the module docstring)."""

    #: The entry's name in each component of the view, and the name of its script and style
    #: (``/ui/panels/<name>.js``, ``.css``): letters, digits and ``_`` only, neither a field a
    #: component has in the view nor another panel's name (the UI refuses such a panel).
    name: str

    def shown(self, conf: Mapping[str, Any]) -> bool:
        """Whether a worker running with ``conf`` shows the panel on its page (and asks its peers,
        which share the mesh's configuration): False keeps what the feature counts off the page
        (user data not allowed out, or nothing counted)."""
        ...

    def local(self, worker: int, feature: Feature | None) -> Any | None:
        """The answer of the worker serving the page, read from the feature's running part on
        that worker (None when the worker built none: nothing to show)."""
        ...

    def ask(self, channel: grpc.Channel, timeout: float) -> grpc.Future:
        """Start the feature's call on the worker at the other end of ``channel``; the future's
        result is that worker's answer (it raises grpc.RpcError when the worker refuses)."""
        ...

    def merge(self, answers: Sequence[Any]) -> Mapping[str, Mapping[str, Any]]:
        """The answers of the workers shown (up and answering) as one JSON-able entry per
        component; a component with nothing to show is left out."""
        ...

    def script(self) -> bytes:
        """The panel's JavaScript (loaded after the page's own, which it registers with)."""
        ...

    def style(self) -> bytes:
        """The panel's CSS."""
        ...
