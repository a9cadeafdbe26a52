"""Config: documented defaults, YAML < env < overrides, errors naming key and value."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tuplemesh.config import KEYS, Config, env_name
from tuplemesh.errors import ConfigError

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


def _unused_reads() -> list[str]:
    """Keys read into an attribute that nothing uses, or not read at all (scanning the source)."""
    sources = {p: p.read_text() for p in SERVICES.rglob("*.py") if p.name != "config.py"}
    trees = [ast.parse(text) for text in sources.values()]
    loaded = {
        n.attr
        for tree in trees
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
    }
    problems = []
    for name, key in KEYS.items():
        readers = [(p, t) for p, t in sources.items() if f'"{name}"' in t]
        if not readers and not (key.unit and any(f'seconds("{name}")' in t for t in sources.values())):
            problems.append(f"{name}: read by no code")
        for path, text in readers:
            for node in ast.walk(ast.parse(text)):
                if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                    continue
                target = node.targets[0]
                reads_key = any(isinstance(n, ast.Constant) and n.value == name for n in ast.walk(node.value))
                if reads_key and isinstance(target, ast.Attribute) and target.attr not in loaded:
                    problems.append(f"{name}: stored in .{target.attr} in {path.name}, never used")
    return problems


def test_every_documented_key_is_read_and_used():
    assert _unused_reads() == []
