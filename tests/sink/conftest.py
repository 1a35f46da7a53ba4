import pytest
from testutil import assert_threads_gone

_OURS = ("spark-sink-", "executor-", "worker-", "ticks-", "stop-")


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Every sink writer and LocalCluster thread must be gone after each test."""
    yield
    assert_threads_gone(_OURS, timeout=15)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local SparkSession for every test of the run (a session costs seconds to start).

    Handed to the sinks with use_session, so that they share it and never stop it.
    """
    from pyspark.sql import SparkSession

    from executor.sinks.spark import use_session

    session = (SparkSession.builder.master("local[1]").appName("storm-py-sink-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.log.level", "ERROR")
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
               .getOrCreate())
    use_session(session)
    yield session
    use_session(None)
    session.stop()
