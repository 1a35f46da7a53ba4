"""Dynamic log levels without a cluster: Storm's level names, the LogConfig records and their
codec, the worker's decision (`plan`, on a fake clock), the process-wide keeper on real loggers,
Nimbus's merge and argument checks, and the set_log_level CLI's argument errors."""

from __future__ import annotations

import itertools
import logging

import pytest
from click.testing import CliRunner

from cluster_state import DecodeError, LogConfig, LogLevel
from cluster_state.codec import decode_record, encode_record
from cluster_state.paths import log_config_path
from daemons.cli_loglevel import set_log_level
from daemons.cli_options import StormGroup
from daemons.nimbus.log_config_ops import log_config_view, merge_log_config, requested_levels
from daemons.rpc.protocol import BadRequestError
from executor.log_levels import (
    Changed,
    LogLevelKeeper,
    SetLevel,
    UnknownLevelError,
    logger_key,
    next_expiry,
    plan,
    python_level,
    storm_level,
)

pytestmark = pytest.mark.timeout(10)

DEBUG, INFO, WARN = logging.DEBUG, logging.INFO, logging.WARNING
_names = itertools.count()


def config(**entries: LogLevel) -> LogConfig:
    return LogConfig(entries)


# ---- level names -------------------------------------------------------------------------------

def test_storm_level_names_map_onto_python_levels():
    assert {n: python_level(n) for n in ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")} == {
        "ALL": 1, "TRACE": DEBUG, "DEBUG": DEBUG, "INFO": INFO, "WARN": WARN, "ERROR": logging.ERROR,
        "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}
    # Any case, and Python's own names, come out as Storm's.
    assert [storm_level(n) for n in ("debug", " Warn", "WARNING", "critical")] == ["DEBUG", "WARN", "WARN", "FATAL"]


def test_an_unknown_level_is_an_error_naming_it_and_the_choices():
    with pytest.raises(UnknownLevelError, match=r"unknown log level 'LOUD' \(one of ALL, TRACE, .* OFF\)"):
        storm_level("LOUD")


def test_root_in_any_case_is_the_root_logger():
    assert [logger_key(n) for n in ("ROOT", "root", " Root ", "my.app")] == ["ROOT", "ROOT", "ROOT", "my.app"]


# ---- records -----------------------------------------------------------------------------------

def test_log_config_round_trips_through_the_codec():
    record = config(ROOT=LogLevel("DEBUG", None, 30, 1_700_000_030), **{"my.app": LogLevel("WARN", "INFO")})
    decoded = decode_record(encode_record(record), "/logconfigs/t-1", LogConfig)
    assert decoded == record and type(decoded.named_logger_level["ROOT"]) is LogLevel
    assert log_config_path("t-1-2") == "/logconfigs/t-1-2"


@pytest.mark.parametrize("make", [
    lambda: LogLevel(10),                                  # a level as a number
    lambda: LogLevel("DEBUG", timeout_secs="30"),          # a timeout as text
    lambda: LogConfig({"x": {"target_level": "DEBUG"}}),   # a plain map, not a LogLevel
    lambda: LogConfig({1: LogLevel("DEBUG")}),             # a logger name that is not a str
])
def test_malformed_log_config_records_are_refused(make):
    with pytest.raises(TypeError):
        make()


def test_a_log_config_node_holding_another_record_is_a_decode_error():
    with pytest.raises(DecodeError, match="expected a LogConfig"):
        decode_record(encode_record(LogLevel("DEBUG")), "/logconfigs/t-1", LogConfig)


# ---- the worker's decision ---------------------------------------------------------------------

def test_a_new_entry_is_set_and_the_current_level_becomes_its_reset_level():
    cfg = config(app=LogLevel("DEBUG", None, 30, 130))
    p = plan(cfg, {}, {"app": INFO}, now=100)
    assert p.actions == (SetLevel("app", DEBUG, INFO, 130, "set"),)
    assert p.changed == {"app": Changed(DEBUG, INFO, 130)}
    assert next_expiry(p.changed) == 130
    # The next polls change nothing (the level is not forced again on every poll).
    again = plan(cfg, p.changed, {"app": DEBUG}, now=110)
    assert again.actions == () and again.changed == p.changed


def test_the_level_is_reverted_once_the_timeout_passes():
    cfg = config(app=LogLevel("DEBUG", None, 30, 130))
    changed = plan(cfg, {}, {"app": INFO}, now=100).changed
    assert plan(cfg, changed, {"app": DEBUG}, now=129.9).actions == ()
    p = plan(cfg, changed, {"app": DEBUG}, now=130)
    assert p.actions == (SetLevel("app", INFO, DEBUG, 0, "timeout expired"),)
    assert p.changed == {} and next_expiry(p.changed) is None
    # The expired entry stays in the config: nothing more happens.
    assert plan(cfg, p.changed, {"app": INFO}, now=200).actions == ()


def test_an_entry_that_expired_before_the_worker_saw_it_is_never_applied():
    p = plan(config(app=LogLevel("DEBUG", None, 30, 130)), {}, {"app": INFO}, now=131)
    assert p.actions == () and p.changed == {}


def test_removing_the_entry_reverts_at_once_and_no_timeout_means_none():
    changed = plan(config(ROOT=LogLevel("DEBUG")), {}, {"ROOT": WARN}, now=100).changed
    assert changed == {"ROOT": Changed(DEBUG, WARN, 0)} and next_expiry(changed) is None
    assert plan(config(ROOT=LogLevel("DEBUG")), changed, {"ROOT": DEBUG}, now=10**9).actions == ()
    for gone in (None, config()):
        p = plan(gone, changed, {"ROOT": DEBUG}, now=101)
        assert p.actions == (SetLevel("ROOT", WARN, DEBUG, 0, "setting removed"),) and p.changed == {}


def test_a_re_set_keeps_the_first_reset_level():
    changed = plan(config(app=LogLevel("DEBUG", None, 30, 130)), {}, {"app": INFO}, now=100).changed
    # Set again (another level, a new timeout): the level it had before the first set is kept.
    p = plan(config(app=LogLevel("ERROR", None, 60, 170)), changed, {"app": DEBUG}, now=110)
    assert p.actions == (SetLevel("app", logging.ERROR, DEBUG, 170, "set"),)
    assert p.changed == {"app": Changed(logging.ERROR, INFO, 170)}
    # The same level with a new timeout is a re-set too.
    p2 = plan(config(app=LogLevel("ERROR", None, 60, 180)), p.changed, {"app": logging.ERROR}, now=120)
    assert p2.changed == {"app": Changed(logging.ERROR, INFO, 180)} and len(p2.actions) == 1
    assert plan(config(app=LogLevel("ERROR", None, 60, 180)), p2.changed, {"app": logging.ERROR},
                now=180).actions == (SetLevel("app", INFO, logging.ERROR, 0, "timeout expired"),)


def test_an_entry_with_a_reset_level_reverts_to_it():
    cfg = config(app=LogLevel("DEBUG", "ERROR", 10, 110))
    changed = plan(cfg, {}, {"app": INFO}, now=100).changed
    assert changed == {"app": Changed(DEBUG, logging.ERROR, 110)}
    assert plan(cfg, changed, {"app": DEBUG}, now=110).actions == (SetLevel("app", logging.ERROR, DEBUG, 0, "timeout expired"),)


def test_several_loggers_each_follow_their_own_entry_and_unknown_levels_are_skipped():
    cfg = config(a=LogLevel("DEBUG", None, 10, 110), b=LogLevel("WARN"), c=LogLevel("LOUD"))
    p = plan(cfg, {}, {"a": INFO, "b": logging.NOTSET, "c": INFO}, now=100)
    assert [a.logger for a in p.actions] == ["a", "b"] and set(p.changed) == {"a", "b"}
    assert p.unknown == (("c", "LOUD"),)
    later = plan(cfg, p.changed, {"a": DEBUG, "b": WARN, "c": INFO}, now=111)
    assert later.actions == (SetLevel("a", INFO, DEBUG, 0, "timeout expired"),) and set(later.changed) == {"b"}


# ---- the keeper on this process's loggers ------------------------------------------------------

def test_the_keeper_sets_and_reverts_real_loggers_shared_by_two_workers():
    name = f"test_log_levels.k{next(_names)}"
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    keeper = LogLevelKeeper()
    keeper.attach("t-1")
    keeper.attach("t-1")  # two workers of one topology in this process (LocalCluster)
    cfg = config(**{name: LogLevel("DEBUG", None, 5, 105)})
    assert keeper.sync("t-1", cfg, 100) == 105
    assert logger.level == logging.DEBUG
    # The second worker's sync neither re-applies nor takes DEBUG as the reset level.
    keeper.sync("t-1", cfg, 101)
    assert keeper.changed("t-1") == {name: Changed(DEBUG, INFO, 105)}
    assert keeper.sync("t-1", cfg, 105) is None
    assert logger.level == logging.INFO and keeper.changed("t-1") == {}
    # Set again; the last worker of the topology stopping puts the level back.
    keeper.sync("t-1", config(**{name: LogLevel("ERROR")}), 200)
    assert logger.level == logging.ERROR
    keeper.detach("t-1")
    assert logger.level == logging.ERROR
    keeper.detach("t-1")
    assert logger.level == logging.INFO and keeper.changed("t-1") == {}


def test_the_keeper_logs_each_change_at_info(caplog):
    name = f"test_log_levels.k{next(_names)}"
    keeper = LogLevelKeeper()
    with caplog.at_level(logging.INFO, logger="executor.log_levels"):
        keeper.sync("t-1", config(**{name: LogLevel("DEBUG", None, 5, 105)}), 100)
        keeper.sync("t-1", None, 101)
    text = caplog.text
    assert f"log level of {name} set to DEBUG (was NOTSET) until " in text
    assert f"log level of {name} reset to NOTSET (setting removed)" in text
    assert logging.getLogger(name).level == logging.NOTSET


# ---- Nimbus's merge ----------------------------------------------------------------------------

def test_nimbus_merge_sets_removes_and_keeps_other_loggers_and_reset_levels():
    current = config(a=LogLevel("DEBUG", "INFO", 0, 0), b=LogLevel("WARN"), c=LogLevel("ERROR"))
    merged = merge_log_config(current, {"a": ("TRACE", 3), "b": (None, 0), "d": ("OFF", 0)}, now=100.2)
    assert merged == config(a=LogLevel("TRACE", "INFO", 3, 104), c=LogLevel("ERROR"), d=LogLevel("OFF"))
    assert merge_log_config(None, {"x": (None, 0)}, now=1) == config()
    view = log_config_view(merged)
    assert view == {"namedLoggerLevels": {
        "a": {"target_level": "TRACE", "reset_level": "INFO", "timeout": 3, "timeout_epoch": 104_000},
        "c": {"target_level": "ERROR", "reset_level": "", "timeout": 0, "timeout_epoch": 0},
        "d": {"target_level": "OFF", "reset_level": "", "timeout": 0, "timeout_epoch": 0}}}


def test_nimbus_argument_checks_name_the_logger():
    assert requested_levels({"root": {"target_level": "warning", "timeout": 5}, "x": {"target_level": ""},
                             "y": {"target_level": None}}) == {"ROOT": ("WARN", 5), "x": (None, 0), "y": (None, 0)}
    for bad, match in [({}, "empty"),
                       ({"": {"target_level": "DEBUG"}}, "non-empty strings"),
                       ({"app": "DEBUG"}, "logger 'app': expected"),
                       ({"app": {"target_level": "LOUD"}}, "logger 'app': unknown log level 'LOUD'"),
                       ({"app": {"target_level": 10}}, "logger 'app': target_level must be a string"),
                       ({"app": {"target_level": "DEBUG", "timeout": -1}}, "logger 'app': timeout"),
                       ({"app": {"target_level": "DEBUG", "timeout": "3"}}, "logger 'app': timeout")]:
        with pytest.raises(BadRequestError, match=match):
            requested_levels(bad)


# ---- the CLI's argument errors (before anything is sent) ---------------------------------------

def _cli(conf_dir, *args: str):
    group = StormGroup("storm-py")
    group.add_command(set_log_level)
    (conf_dir / "storm.yaml").write_text("{}\n")  # the packaged defaults; nothing here reaches Nimbus
    return CliRunner().invoke(group, ["set_log_level", *args, "--conf-dir", str(conf_dir)])


@pytest.mark.parametrize("args, message", [
    (["-l", "app"], "error: -l 'app': expected LOGGER=LEVEL[:TIMEOUT_SECS]"),
    (["-l", "=DEBUG"], "error: -l '=DEBUG': expected LOGGER=LEVEL[:TIMEOUT_SECS]"),
    (["-l", "app=LOUD:30"], "error: -l 'app=LOUD:30': unknown log level 'LOUD' (one of ALL, TRACE, DEBUG"),
    (["-l", "app=DEBUG:-3"], "error: -l 'app=DEBUG:-3': the timeout must be whole seconds >= 0, got '-3'"),
    (["-l", "app=DEBUG:soon"], "error: -l 'app=DEBUG:soon': the timeout must be whole seconds >= 0, got 'soon'"),
    (["-l", "app=DEBUG", "-r", "app"], "error: -r 'app': logger app is both set and removed"),
    ([], "error: nothing to change: give -l LOGGER=LEVEL[:TIMEOUT_SECS] or -r LOGGER"),
])
def test_cli_argument_errors_are_one_line_naming_the_argument(tmp_path, args, message):
    result = _cli(tmp_path, "wc", *args)
    assert result.exit_code == 1, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(message), result.output


def _fake_nimbus(sent: list, levels: dict):
    """A `call` recording each request; get_log_config answers `levels` (logger -> level)."""
    def call(conf, op, **args):
        sent.append((op, args))
        if op == "get_log_config":
            return {"namedLoggerLevels": {k: {"target_level": v, "reset_level": "", "timeout": 0, "timeout_epoch": 0}
                                          for k, v in levels.items()}}
        return None
    return call


def test_cli_removing_a_logger_never_set_is_an_error_naming_it_and_changes_nothing(tmp_path, monkeypatch):
    sent = []
    monkeypatch.setattr("daemons.cli_loglevel.call", _fake_nimbus(sent, {"my.app": "DEBUG"}))
    result = _cli(tmp_path, "wc", "-l", "ROOT=INFO", "-r", "never.set")
    assert result.exit_code == 1, result.output
    assert result.output.strip() == ("error: topology wc has no log level set for never.set: nothing to remove "
                                     "(loggers with a level set: my.app); nothing was changed")
    assert [op for op, _args in sent] == ["get_log_config"]


def test_cli_sends_storm_s_request_and_says_what_it_did(tmp_path, monkeypatch):
    sent = []
    monkeypatch.setattr("daemons.cli_loglevel.call", _fake_nimbus(sent, {"other": "DEBUG"}))
    result = _cli(tmp_path, "wc", "-l", "root=debug:30", "-l", "my.app=WARNING", "-r", "other")
    assert result.exit_code == 0, result.output
    assert sent == [("get_log_config", {"name": "wc"}), ("set_log_config", {"name": "wc", "named_logger_levels": {
        "ROOT": {"target_level": "DEBUG", "timeout": 30}, "my.app": {"target_level": "WARN", "timeout": 0},
        "other": {"target_level": None, "timeout": 0}}})]
    assert result.output.splitlines() == [
        "topology wc: log level of ROOT set to DEBUG for 30 s",
        "topology wc: log level of my.app set to WARN (no timeout)",
        "topology wc: removed the log level of other (back to its reset level)"]


def test_a_root_change_leaves_kazoo_s_packet_dumps_out_unless_kazoo_is_named():
    import logging

    from cluster_state.records import LogConfig, LogLevel
    from executor.log_levels import LogLevelKeeper

    keeper, root, kazoo = LogLevelKeeper(), logging.getLogger(), logging.getLogger("kazoo")
    before = root.level, kazoo.level
    try:
        root.setLevel(logging.INFO)
        keeper.attach("t-1-1")
        keeper.sync("t-1-1", LogConfig({"ROOT": LogLevel("DEBUG", None, 0)}), 100.0)
        assert root.level == logging.DEBUG and kazoo.getEffectiveLevel() == logging.INFO
        both = LogConfig({"ROOT": LogLevel("DEBUG", None, 0), "kazoo.client": LogLevel("DEBUG", None, 0)})
        keeper.sync("t-1-1", both, 101.0)
        assert logging.getLogger("kazoo.client").getEffectiveLevel() == logging.DEBUG  # named: it is set
        keeper.sync("t-1-1", None, 102.0)
        assert root.level == logging.INFO and kazoo.level == logging.NOTSET  # all back as it was
        keeper.detach("t-1-1")
    finally:
        root.setLevel(before[0])
        kazoo.setLevel(before[1])
        logging.getLogger("kazoo.client").setLevel(logging.NOTSET)
