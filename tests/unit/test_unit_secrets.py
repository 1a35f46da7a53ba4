"""Secrets in configs are never shown: top-level secret keys, and a nested mapping's password
(topology.state.provider.config carries the Redis password to the workers, so it stays in the
topology's conf, masked wherever the conf is shown: the UI/REST and config error messages)."""

from cluster_state.config import ConfigError, check_value
from cluster_state.secrets import MASK, masked_value, redact
from executor.package import masked

PROVIDER = {"host": "127.0.0.1", "port": 6379, "password": "s3cret"}


def test_nested_passwords_and_secret_keys_are_masked():
    conf = {"topology.state.provider.config": PROVIDER, "nimbus.authentication.secret": "x",
            "my.service.password": "y", "topology.workers": 2}
    shown = masked(conf)
    assert shown["topology.state.provider.config"] == {"host": "127.0.0.1", "port": 6379, "password": MASK}
    assert shown["nimbus.authentication.secret"] == MASK and shown["my.service.password"] == MASK
    assert shown["topology.workers"] == 2
    assert PROVIDER["password"] == "s3cret"  # a copy: the conf itself is unchanged
    assert redact([{"secret": 1}, 2]) == [{"secret": MASK}, 2]
    assert masked_value("topology.state.provider.config", None) is None


def test_a_config_error_never_shows_the_password():
    for value in ({**PROVIDER, "bogus": 1}, "password=s3cret", {**PROVIDER, "port": "x"}):
        try:
            check_value("topology.state.provider.config", value)
        except ConfigError as exc:
            assert "s3cret" not in str(exc) and "topology.state.provider.config" in str(exc)
        else:
            raise AssertionError(f"{value!r} was accepted")


def test_the_topology_page_masks_the_provider_password():
    from test_unit_ui_views import details

    from daemons.reports import views

    d = details(conf={"topology.state.provider.config": PROVIDER})
    assert views.topology_detail(d)["configuration"]["topology.state.provider.config"]["password"] == MASK
