"""The example files users copy are valid: deploy/storm.yaml.example loads through storm-py's
own config loader (with its commented secrets too), conf/storm.yaml changes nothing,
conf/logging.yaml is a working dictConfig, and the systemd units say what deploy/README.md
promises. No ZooKeeper, no processes: these markers are the truth (not zk, not cluster)."""

from __future__ import annotations

import configparser
import logging
import logging.config
import re
from pathlib import Path

import pytest
import yaml

from cluster_state.config import load_storm_config

pytestmark = [pytest.mark.timeout(30)]
ROOT = Path(__file__).resolve().parents[2]


def test_deploy_storm_yaml_example_loads_with_and_without_its_commented_keys(tmp_path):
    text = (ROOT / "deploy" / "storm.yaml.example").read_text()
    for variant in (text, re.sub(r"^# ([a-z][a-z.]+: )", r"\1", text, flags=re.M)):
        (tmp_path / "storm.yaml").write_text(variant)
        conf = load_storm_config(tmp_path, {}).conf
        assert len(conf["storm.zookeeper.servers"]) == 3
        assert conf["nimbus.seeds"] and conf["supervisor.slots.ports"] == [6700, 6701, 6702, 6703]
    assert conf["nimbus.authentication.secret"] == "change-me"


def test_conf_storm_yaml_example_changes_nothing():
    assert yaml.safe_load((ROOT / "conf" / "storm.yaml").read_text()) is None
    loaded = load_storm_config(ROOT / "conf", {})
    assert not [k for k in loaded.conf if "storm.yaml" in str(loaded.source_of(k))]


def test_conf_logging_yaml_is_a_working_dict_config(tmp_path):
    config = yaml.safe_load((ROOT / "conf" / "logging.yaml").read_text())
    config["handlers"]["file"]["filename"] = str(tmp_path / "nimbus.log")
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        logging.config.dictConfig(config)
        logging.getLogger("storm-py-test").info("hello")
        for handler in root.handlers:
            handler.flush()
    finally:
        for handler in list(root.handlers):
            if handler not in saved[0]:
                root.removeHandler(handler)
                handler.close()
        for handler in saved[0]:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(saved[1])
        logging.getLogger("kazoo").setLevel(logging.NOTSET)
    assert "hello" in (tmp_path / "nimbus.log").read_text()


@pytest.mark.parametrize("unit, command, kill_mode", [
    ("storm-py-nimbus.service", "storm-py nimbus", None),
    ("storm-py-supervisor.service", "storm-py supervisor", "process"),
])
def test_systemd_units(unit, command, kill_mode):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read(ROOT / "deploy" / unit)
    service = parser["Service"]
    assert service["ExecStart"].endswith(command)
    assert service["Restart"] == "on-failure"
    assert service.get("KillMode") == kill_mode
    assert "STORM_CONF_DIR=" in service["Environment"]
