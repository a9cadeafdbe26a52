"""Config: documented defaults, YAML < env < overrides, errors naming key and value."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tuplemesh.config import KEYS, Config, env_name, seconds
from tuplemesh.errors import ConfigError
from tuplemesh.transport import Capabilities

SERVICES = Path(__file__).resolve().parents[1] / "services" / "tuplemesh"


def test_defaults_are_storm_keys():
    conf = Config()
    assert conf["topology.executor.receive.buffer.size"] == 1024
    assert conf["topology.transfer.buffer.size"] == 1024
    assert conf["topology.receiver.buffer.size"] == 8
    assert conf["topology.batch.flush.interval.millis"] == 1.0
    assert conf["messaging.transport"] == "grpc"
    assert all(k.doc for k in KEYS.values())


def test_precedence_yaml_env_overrides(tmp_path):
    path = tmp_path / "tuplemesh.yaml"
    path.write_text("topology.producer.batch.size: 50\ntopology.transfer.batch.size: 500\nmy.key: [1, 2]\n")
    env = {env_name("topology.transfer.batch.size"): "700", "TUPLEMESH_UNRELATED": "x"}
    conf = Config.load(path, env=env, overrides={"admin.emit.enabled": True})
    assert conf["topology.producer.batch.size"] == 50
    assert conf["topology.transfer.batch.size"] == 700
    assert conf["admin.emit.enabled"] is True
    assert conf["my.key"] == [1, 2]


def test_a_topologys_own_conf_wins_over_file_environment_and_flags(tmp_path):
    path = tmp_path / "tuplemesh.yaml"
    path.write_text("topology.producer.batch.size: 50\ntopology.transfer.batch.size: 500\n")
    env = {env_name("topology.transfer.batch.size"): "700"}
    conf = Config.load(path, env=env, overrides={"topology.workers": 3})
    own = {"topology.transfer.batch.size": 900, "topology.workers": 4, "word.list": ["a"]}
    run = conf.with_topology(own)
    assert (run["topology.producer.batch.size"], run["topology.transfer.batch.size"]) == (50, 900)
    assert (run["topology.workers"], run["word.list"]) == (4, ["a"])
    assert run.given("topology.transfer.batch.size") and not run.given("topology.max.spout.pending")
    assert conf.with_topology({}) is conf
    with pytest.raises(ConfigError, match=r"producer.batch.size'.*> 0.*got 0"):
        conf.with_topology({"topology.producer.batch.size": 0})  # validated like any other source


def test_env_name():
    assert env_name("topology.producer.batch.size") == "TUPLEMESH_TOPOLOGY_PRODUCER_BATCH_SIZE"


@pytest.mark.parametrize(
    ("values", "pattern"),
    [
        ({"topology.executor.receive.buffer.size": 1000}, r"receive.buffer.size'.*power of two.*got 1000"),
        ({"topology.producer.batch.size": 0}, r"producer.batch.size'.*> 0.*got 0"),
        ({"topology.producer.batch.size": "ten"}, r"producer.batch.size'.*integer.*got 'ten'"),
        ({"admin.emit.enabled": "maybe"}, r"admin.emit.enabled'.*boolean"),
        ({"topology.disruptor.wait.strategy": "spin"}, r"wait.strategy'.*known: blocking"),
        ({"topology.recieve.buffer.size": 8}, r"recieve.buffer.size'.*unknown key"),
        ({"topology.batch.flush.interval.millis": -1}, r"flush.interval.millis'.*> 0"),
    ],
)
def test_bad_values_name_key_and_value(values, pattern):
    with pytest.raises(ConfigError, match=pattern):
        Config(values)


def test_bad_env_value_names_the_key():
    with pytest.raises(ConfigError, match=r"topology.transfer.batch.size'.*integer.*'lots'"):
        Config.load(env={"TUPLEMESH_TOPOLOGY_TRANSFER_BATCH_SIZE": "lots"})


def test_env_booleans_and_numbers_parse():
    conf = Config.load(
        env={"TUPLEMESH_ADMIN_EMIT_ENABLED": "yes", "TUPLEMESH_TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS": "2.5"}
    )
    assert conf["admin.emit.enabled"] is True and conf["topology.batch.flush.interval.millis"] == 2.5


def test_bad_yaml_files(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="cannot be read"):
        Config.load(missing, env={})
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Config.load(broken, env={})
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="mapping"):
        Config.load(scalar, env={})


def test_a_wait_strategy_that_is_not_one_of_the_known_ones_is_refused_at_load():
    # a worker could only fail later: the ring buffers build wait strategies from the alias table
    with pytest.raises(ConfigError) as err:
        Config({"topology.disruptor.wait.strategy": "tests.helpers:ListSpout"})
    assert "topology.disruptor.wait.strategy" in str(err.value)
    assert "tests.helpers:ListSpout" in str(err.value) and "known: blocking" in str(err.value)


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("topology.tuple.serializer", "nosuchmodule:Serializer", "could not import module 'nosuchmodule'"),
        ("topology.tuple.serializer", "pickle", "unknown value 'pickle'"),
        ("messaging.transport", "tests.helpers:ListSpout", "is not a transport plugin"),
    ],
)
def test_plugin_keys_resolve_when_the_config_is_built(key, value, problem):
    with pytest.raises(ConfigError) as err:
        Config({key: value})
    assert key in str(err.value) and value in str(err.value) and problem in str(err.value)


def test_plugin_keys_accept_module_attr_that_resolves():
    conf = Config(
        {
            "topology.tuple.serializer": "tuplemesh.serialization:JsonSerializer",
            "messaging.transport": "tuplemesh.transport.local:LocalContext",
        }
    )
    assert conf["topology.tuple.serializer"] == "tuplemesh.serialization:JsonSerializer"


class _ContextShape:
    """Every method of a transport context; what it can do is declared (or not) by a subclass."""

    def prepare(self, *args): ...

    def bind(self, *args): ...

    def connect(self, *args, held=None): ...

    def term(self): ...


class UndeclaredTransport(_ContextShape):
    capabilities = {"in_process": True}  # a dict, not the declared type


class DeclaredTransport(_ContextShape):
    capabilities = Capabilities(in_process=True)


def test_a_users_transport_must_declare_its_capabilities_when_the_config_is_built():
    with pytest.raises(ConfigError) as err:
        Config({"messaging.transport": "tests.test_config:UndeclaredTransport"})
    assert str(err.value) == (
        "config key 'messaging.transport': does not resolve: messaging.transport: "
        "'tests.test_config:UndeclaredTransport' is not a transport plugin (no capabilities) "
        "(got 'tests.test_config:UndeclaredTransport')"
    )
    conf = Config({"messaging.transport": "tests.test_config:DeclaredTransport"})
    assert conf["messaging.transport"] == "tests.test_config:DeclaredTransport"


class TransportOfAnOlderApi(DeclaredTransport):
    def connect(self, topology_id, host, port, on_congestion=None, receiver=-1, epoch=""): ...


def test_a_transport_whose_connect_takes_no_held_bytes_is_refused_naming_the_argument():
    with pytest.raises(ConfigError) as err:
        Config({"messaging.transport": "tests.test_config:TransportOfAnOlderApi"})
    message = str(err.value)
    assert "'tests.test_config:TransportOfAnOlderApi': its connect() takes no 'held' argument" in message
    assert "tuplemesh.transport.HeldBytes" in message
    for builtin in ("local", "grpc", "zmq"):  # every built-in transport takes it
        assert Config({"messaging.transport": builtin})["messaging.transport"] == builtin


def test_a_state_backend_without_from_conf_is_refused_when_the_config_is_built():
    with pytest.raises(ConfigError) as err:
        Config({"topology.state.backend": "tuplemesh.state.kv:DictState"})
    message = str(err.value)
    assert message.startswith(
        "config key 'topology.state.backend': does not resolve: topology.state.backend "
        "'tuplemesh.state.kv:DictState': "
    )
    assert "has no from_conf(conf) classmethod" in message


def test_seconds_converts_by_the_unit_of_the_key_row():
    conf = Config({"zmq.linger.millis": 250, "task.refresh.poll.secs": 2.5})
    assert conf.seconds("zmq.linger.millis") == 0.25
    assert conf.seconds("task.refresh.poll.secs") == 2.5
    assert conf.seconds("topology.batch.flush.interval.millis") == 0.001
    with pytest.raises(KeyError):
        conf.seconds("topology.workers")


def test_every_time_key_declares_its_unit():
    for name, key in KEYS.items():
        if name.endswith((".millis", ".secs", "_ms", ".ms")):
            assert key.unit in ("millis", "secs"), name


@pytest.mark.parametrize(
    ("yaml_workers", "env", "expected"),
    [
        (None, {}, 1),  # the key's default
        (2, {}, 2),  # the file beats the default
        (2, {"TUPLEMESH_TOPOLOGY_WORKERS": "4"}, 4),  # the key's env var beats the file
        (2, {"TUPLEMESH_WORKERS": "5"}, 5),  # so does the flag's env var
        (None, {"TUPLEMESH_WORKERS": "5", "TUPLEMESH_TOPOLOGY_WORKERS": "4"}, 4),  # the key's name wins a tie
    ],
)
def test_flag_env_var_is_an_alias_of_its_key(tmp_path, yaml_workers, env, expected):
    path = tmp_path / "c.yaml"
    path.write_text(f"topology.workers: {yaml_workers}\n" if yaml_workers else "")
    assert Config.load(path, env=env)["topology.workers"] == expected


def _service_sources() -> dict[Path, str]:
    return {p: p.read_text() for p in SERVICES.rglob("*.py") if p.name != "config.py"}


def _unused_reads(sources: dict[Path, str]) -> list[str]:
    """Keys read by no code, or read into an attribute or a settings field that nothing uses.

    A key counts as read where its name is quoted in code: a module's own lookup, or a typed
    settings class (``QueueSettings.from_config``) that passes it as a keyword to its fields."""
    trees = {path: ast.parse(text) for path, text in sources.items()}
    loaded = {
        n.attr
        for tree in trees.values()
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
    }

    def reads(node: ast.AST, name: str) -> bool:
        return any(isinstance(n, ast.Constant) and n.value == name for n in ast.walk(node))

    def looks_up(node: ast.AST, name: str) -> bool:
        """``conf["key"]`` or ``conf.seconds("key")`` itself (not a help text naming the key)."""
        if isinstance(node, ast.Subscript):
            return isinstance(node.slice, ast.Constant) and node.slice.value == name
        is_seconds = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "seconds"
        )
        return is_seconds and reads(node, name)

    # the fields a typed settings class fills from the config in its ``from_config``
    settings_fields = {
        path: [
            kw
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef) and fn.name == "from_config"
            for kw in ast.walk(fn)
            if isinstance(kw, ast.keyword)
        ]
        for path, tree in trees.items()
    }
    problems = []
    for name in KEYS:
        readers = [path for path, text in sources.items() if f'"{name}"' in text]
        if not readers:
            problems.append(f"{name}: read by no code")
        for path in readers:
            for node in ast.walk(trees[path]):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if (
                        reads(node.value, name)
                        and isinstance(target, ast.Attribute)
                        and target.attr not in loaded
                    ):
                        problems.append(f"{name}: stored in .{target.attr} in {path.name}, never used")
            for field in settings_fields[path]:
                if looks_up(field.value, name) and field.arg not in loaded:
                    problems.append(f"{name}: passed as {field.arg}= in {path.name}, never used")
    return problems


def test_every_documented_key_is_read_and_used():
    assert _unused_reads(_service_sources()) == []


def test_a_key_read_only_into_a_settings_field_counts_once_the_field_is_used():
    sources = _service_sources()
    settings = (
        "class ProbeSettings:\n"
        "    @classmethod\n"
        "    def from_config(cls, conf):\n"
        "        return cls(probe_window_seconds=conf.seconds('messaging.close.timeout.secs'))\n"
    )
    # the key's own readers gone, the settings class its only reader
    alone = {
        path: text.replace('"messaging.close.timeout.secs"', '"elsewhere"') for path, text in sources.items()
    }
    alone[Path("probe.py")] = settings.replace("'", '"')
    assert "messaging.close.timeout.secs: passed as probe_window_seconds= in probe.py, never used" in (
        _unused_reads(alone)
    )
    alone[Path("user.py")] = "def wait(s):\n    return s.probe_window_seconds\n"
    assert not [p for p in _unused_reads(alone) if p.startswith("messaging.close.timeout.secs")]
    del alone[Path("probe.py")]
    assert "messaging.close.timeout.secs: read by no code" in _unused_reads(alone)


def test_a_bad_value_in_the_file_names_the_key_the_file_the_rule_and_the_value(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("topology.receiver.buffer.size: 0\n")
    with pytest.raises(ConfigError) as err:
        Config.load(path, env={})
    assert (
        str(err.value) == f"config key 'topology.receiver.buffer.size' (set by {path}): must be > 0 (got 0)"
    )
    assert (err.value.key, err.value.value, err.value.source) == (
        "topology.receiver.buffer.size",
        0,
        str(path),
    )


def test_a_bad_env_value_names_the_variable_and_the_text_as_written():
    with pytest.raises(ConfigError) as err:
        Config.load(env={"TUPLEMESH_TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE": "1000"})
    assert str(err.value) == (
        "config key 'topology.executor.receive.buffer.size' (set by "
        "TUPLEMESH_TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE): must be a power of two >= 1 "
        "(ring buffers index by mask) (got '1000')"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"workers": "0"}, "config key 'topology.workers' (set by --workers): must be > 0 (got '0')"),
        (
            {"workers": "two"},
            "config key 'topology.workers' (set by --workers): must be an integer (got 'two')",
        ),
        ({"index": "-1"}, "config key 'worker.index' (set by --index): must be >= 0 (got '-1')"),
        (
            {"transport": "pigeon"},
            "config key 'messaging.transport' (set by --transport): does not resolve: messaging.transport: "
            "unknown value 'pigeon'; known: grpc, local, zmq, or 'module:attr' (got 'pigeon')",
        ),
    ],
)
def test_a_bad_flag_value_is_refused_by_its_key_rule(flags, message):
    with pytest.raises(ConfigError) as err:
        Config.load(env={}, flags=flags)
    assert str(err.value) == message


def test_flags_are_parsed_as_text_and_beat_the_env_and_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("topology.workers: 2\n")
    conf = Config.load(path, env={"TUPLEMESH_WORKERS": "3"}, flags={"workers": "4", "index": "1"})
    assert conf["topology.workers"] == 4 and conf["worker.index"] == 1


def test_an_enum_key_lists_its_choices():
    with pytest.raises(ConfigError) as err:
        Config.load(env={"TUPLEMESH_TOPOLOGY_TUPLE_SERIALIZER": "pickle"})
    assert "(set by TUPLEMESH_TOPOLOGY_TUPLE_SERIALIZER)" in str(err.value)
    assert "known: json, msgpack" in str(err.value) and "(got 'pickle')" in str(err.value)


def test_a_file_that_is_not_yaml_is_refused_in_one_line(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [1,\n")
    with pytest.raises(ConfigError) as err:
        Config.load(broken, env={})
    assert "\n" not in str(err.value) and "line 2" in str(err.value)


def test_every_key_that_counts_something_declares_what():
    for name, key in KEYS.items():
        if key.type in (int, float) and name not in ("worker.index", "metrics.port"):
            assert key.unit, name


def test_settings_views_hold_each_key_in_the_unit_their_field_names():
    from tuplemesh.core.acking import AckingSettings
    from tuplemesh.server.settings import ServerSettings
    from tuplemesh.transport.settings import TransportSettings
    from tuplemesh.worker.settings import QueueSettings, WorkerSettings

    conf = Config(
        {
            "topology.batch.flush.interval.millis": 2.5,
            "topology.disruptor.wait.timeout.millis": 250.0,
            "topology.sleep.spout.wait.strategy.time.ms": 3.0,
            "topology.message.timeout.secs": 12.0,
            "storm.messaging.netty.min_wait_ms": 7,
            "storm.messaging.netty.max_wait_ms": 900,
            "messaging.close.timeout.secs": 4.0,
            "zmq.linger.millis": 120,
            "task.refresh.poll.secs": 2.0,
        }
    )
    queues, worker = QueueSettings.from_config(conf), WorkerSettings.from_config(conf)
    # the same floats the modules computed with '/ 1000.0' before they had typed views
    assert queues.flush_interval_seconds == 2.5 / 1000.0 and queues.wait_timeout_seconds == 0.25
    assert worker.spout_wait_seconds == 3.0 / 1000.0 and worker.shutdown_timeout_seconds == 30.0
    assert queues.receive_buffer_batches == 1024 and queues.producer_batch_tuples == 100
    transport = TransportSettings.from_config(conf)
    assert (transport.reconnect_min_wait_millis, transport.reconnect_min_wait_seconds) == (7, 7 / 1000.0)
    assert (transport.reconnect_max_wait_millis, transport.reconnect_max_wait_seconds) == (900, 0.9)
    assert transport.zmq_linger_millis == 120 and transport.close_timeout_seconds == 4.0
    assert AckingSettings.from_config(conf) == AckingSettings(0, 12.0, 10000)
    assert ServerSettings.from_config(conf).refresh_poll_seconds == 2.0


def test_settings_from_a_plain_mapping_are_validated_and_defaulted():
    from tuplemesh.worker.settings import QueueSettings

    assert QueueSettings.from_config({"topology.producer.batch.size": 7}).producer_batch_tuples == 7
    with pytest.raises(ConfigError, match=r"receive.buffer.size'.*power of two"):
        QueueSettings.from_config({"topology.executor.receive.buffer.size": 1000})


def test_the_module_level_seconds_reads_a_plain_mapping_by_the_key_unit():
    assert seconds({"zmq.linger.millis": 1500}, "zmq.linger.millis") == 1.5
    assert seconds({"topology.message.timeout.secs": 0.0}, "topology.message.timeout.secs") == 0.0
    with pytest.raises(KeyError):
        seconds({"topology.workers": 2}, "topology.workers")


def test_given_tells_a_set_key_from_its_default(tmp_path):
    path = tmp_path / "tuplemesh.yaml"
    path.write_text("topology.workers: 1\n")  # set to its default value: still given
    assert Config.load(path, env={}).given("topology.workers")
    assert Config.load(env={"TUPLEMESH_WORKERS": "2"}).given("topology.workers")
    assert Config.load(env={}, flags={"workers": "3"}).given("topology.workers")
    plain = Config.load(env={})
    assert not plain.given("topology.workers")
    assert plain.with_overrides({"worker.index": 2}).given("worker.index")
    assert not plain.with_overrides({"worker.index": 2}).given("topology.workers")


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("admin.tokn: s3cr3t-token-value", "admin.tokn"),
        ("topology.state.redis.passwd: s3cr3t-token-value", "topology.state.redis.passwd"),
        ("tls.client.secret: s3cr3t-token-value", "tls.client.secret"),
    ],
)
def test_a_misspelt_secret_key_is_named_but_its_value_is_not_echoed(tmp_path, line, key):
    path = tmp_path / "c.yaml"
    path.write_text(line + "\n")
    with pytest.raises(ConfigError) as err:
        Config.load(path, env={})
    assert "s3cr3t-token-value" not in str(err.value)
    assert str(err.value) == (
        f"config key {key!r} (set by {path}): unknown key (see `tuplemesh config` for the known ones) "
        "(got '***')"
    )


def test_a_secret_keys_bad_value_is_shown_as_stars():
    with pytest.raises(ConfigError) as err:
        Config.load(env={"TUPLEMESH_ADMIN_TOKEN": "x"}, overrides={"admin.token": 12345})
    assert "12345" not in str(err.value)
    assert str(err.value) == "config key 'admin.token': must be a string (got '***')"


def test_an_unknown_key_that_holds_no_secret_still_shows_its_value():
    with pytest.raises(ConfigError, match=r"'topology.wrokers'.*unknown key.*\(got 3\)"):
        Config({"topology.wrokers": 3})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "must be > 0 (got 0)"),
        (-8, "must be > 0 (got -8)"),
        (8.5, "must be an integer (got 8.5)"),
        ("eight", "must be an integer (got 'eight')"),
        (True, "must be an integer (got True)"),
    ],
)
def test_the_replay_cache_size_must_be_a_positive_integer(value, message):
    with pytest.raises(ConfigError) as err:
        Config({"mesh.secret.replay.cache.entries": value})
    assert str(err.value) == f"config key 'mesh.secret.replay.cache.entries': {message}"


def test_the_replay_cache_size_from_the_environment():
    env = {"TUPLEMESH_MESH_SECRET_REPLAY_CACHE_ENTRIES": "8"}
    assert Config.load(env=env)["mesh.secret.replay.cache.entries"] == 8
    assert Config.load(env={})["mesh.secret.replay.cache.entries"] == 65_536
    with pytest.raises(ConfigError) as err:
        Config.load(env={"TUPLEMESH_MESH_SECRET_REPLAY_CACHE_ENTRIES": "0"})
    assert str(err.value) == (
        "config key 'mesh.secret.replay.cache.entries' (set by TUPLEMESH_MESH_SECRET_REPLAY_CACHE_ENTRIES): "
        "must be > 0 (got '0')"
    )


def _time_key_readers() -> tuple[set[str], set[str]]:
    """(modules that call ``seconds``, modules that read a time key's raw value by its literal
    name: ``conf["x.secs"]`` or ``conf.get("x.secs")``), relative to services/."""
    import ast
    from pathlib import Path

    from tuplemesh.config import KEYS

    timed = {name for name, row in KEYS.items() if row.unit in ("secs", "millis")}
    root = Path(__file__).resolve().parents[1] / "services"
    converters, raw = set(), set()
    for path in (root / "tuplemesh").rglob("*.py"):
        module = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name == "seconds":  # Config.seconds(key) or config.seconds(conf, key)
                    converters.add(module)
                elif name == "get" and node.args and getattr(node.args[0], "value", None) in timed:
                    raw.add(module)
            elif isinstance(node, ast.Subscript) and getattr(node.slice, "value", None) in timed:
                raw.add(module)
    return converters, raw


def _is_view(module: str) -> bool:
    # the converter, AckingSettings (read by the worker and the acker alike), and every settings.py
    return module in ("tuplemesh/config.py", "tuplemesh/core/acking.py") or module.endswith("/settings.py")


def test_time_keys_are_read_in_seconds_only_by_the_settings_views() -> None:
    converters, _ = _time_key_readers()
    assert {m for m in converters if not _is_view(m)} == set()


def test_no_module_but_a_settings_view_reads_a_time_key_raw() -> None:
    # a raw read (``conf["ui.events.timeout.secs"]``) leaves the unit to its reader
    _, raw = _time_key_readers()
    assert {m for m in raw if not _is_view(m)} == set()
