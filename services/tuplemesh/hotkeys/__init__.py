"""Hot keys: the top keys of every fields-grouped stream, by tuples and execute time, and a skew
gauge per component. A feature (tuplemesh.core.feature); Admin.HotKeys serves its section."""

from tuplemesh.hotkeys.feature import HotKeys, feature
from tuplemesh.hotkeys.settings import ENABLED_KEY, SAMPLE_KEY, TOP_K_KEY
from tuplemesh.hotkeys.sketch import KeySketch

__all__ = ["ENABLED_KEY", "SAMPLE_KEY", "TOP_K_KEY", "HotKeys", "KeySketch", "feature"]
