"""Hot keys: the top keys of every fields-grouped stream, by tuples and execute time, and a skew
gauge per component. A feature written only against the feature interface: everything it plugs
in lives in this package (its settings, its running part, the call it adds to Admin,
``Admin/HotKeys``, declared in its own proto package, and its panel on the web UI), named by one line of
``tuplemesh.registry``.

The package itself imports nothing: the configuration imports ``tuplemesh.hotkeys.settings`` on
its first read, and that must not bring in the running part (and gRPC) with it. The running part
is in ``tuplemesh.hotkeys.feature``, the sketch in ``tuplemesh.hotkeys.sketch``."""
