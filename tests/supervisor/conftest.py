import pytest
from supervisor_env import Env


@pytest.fixture
def env(zk_conf, tmp_path):
    """A supervisor test rig on the test's ZooKeeper chroot (closed after the test)."""
    e = Env(zk_conf, tmp_path)
    yield e
    e.close()
