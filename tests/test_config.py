"""Config: documented defaults, YAML < env < overrides, errors naming key and value."""

from __future__ import annotations

import pytest

from tuplemesh.config import KEYS, Config, env_name
from tuplemesh.errors import ConfigError


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
    conf = Config.load(path, env=env, overrides={"topology.debug": True})
    assert conf["topology.producer.batch.size"] == 50
    assert conf["topology.transfer.batch.size"] == 700
    assert conf["topology.debug"] is True
    assert conf["my.key"] == [1, 2]


def test_env_name():
    assert env_name("topology.producer.batch.size") == "TUPLEMESH_TOPOLOGY_PRODUCER_BATCH_SIZE"


@pytest.mark.parametrize(
    ("values", "pattern"),
    [
        ({"topology.executor.receive.buffer.size": 1000}, r"receive.buffer.size'.*power of two.*got 1000"),
        ({"topology.producer.batch.size": 0}, r"producer.batch.size'.*> 0.*got 0"),
        ({"topology.producer.batch.size": "ten"}, r"producer.batch.size'.*integer.*got 'ten'"),
        ({"topology.debug": "maybe"}, r"topology.debug'.*boolean"),
        ({"topology.disruptor.wait.strategy": "spin"}, r"wait.strategy'.*one of blocking"),
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
        env={"TUPLEMESH_TOPOLOGY_DEBUG": "yes", "TUPLEMESH_TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS": "2.5"}
    )
    assert conf["topology.debug"] is True and conf["topology.batch.flush.interval.millis"] == 2.5


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
