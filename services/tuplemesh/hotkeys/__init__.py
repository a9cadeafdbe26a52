"""Hot keys: the top keys of every fields-grouped stream, by tuples and execute time, and a skew
gauge per component. A feature written only against the feature interface: everything it plugs
in lives in this package (its settings, its running part, its gRPC service
``tuplemesh.hotkeys.v1.HotKeys`` and its panel on the web UI), named by one line of
``tuplemesh.registry``."""

from tuplemesh.hotkeys.feature import HotKeys, feature
from tuplemesh.hotkeys.settings import ENABLED_KEY, SAMPLE_KEY, TOP_K_KEY
from tuplemesh.hotkeys.sketch import KeySketch

__all__ = ["ENABLED_KEY", "SAMPLE_KEY", "TOP_K_KEY", "HotKeys", "KeySketch", "feature"]
