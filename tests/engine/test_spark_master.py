"""``spark_session`` keeps the master the process already has.

Under ``spark-submit --master M`` (which starts the JVM first and hands PySpark its gateway) or
beside a running session, a session built without ``--spark-master`` must run on that master,
not on ``local[*]``; a different explicit master is refused with the reason, not ignored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpcube.errors import DataError

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("the Spark engine needs a Java runtime", allow_module_level=True)


@pytest.fixture
def restore_defaults() -> Iterator[None]:
    from dpcube.engine import spark_engine

    saved = dict(spark_engine._SESSION_DEFAULTS)
    yield
    spark_engine._SESSION_DEFAULTS.update(saved)


def test_a_running_session_keeps_its_master(restore_defaults: None) -> None:
    from dpcube.engine.spark_engine import configure, environment_master, spark_session

    running = spark_session("local[1]")
    try:
        configure(None, {})
        assert environment_master() == "local[1]"
        again = spark_session()  # no master asked for: the running one, not local[*]
        assert again.sparkContext is running.sparkContext
        assert again.sparkContext.master == "local[1]"
        # local defaults: 4 shuffle partitions per core (at least 2 cores) instead of 200
        assert running.conf.get("spark.sql.shuffle.partitions") == "8"
        with pytest.raises(DataError, match=r"already runs Spark on 'local\[1\]'.*'local\[2\]'"):
            spark_session("local[2]")
        configure("local[3]", {})
        with pytest.raises(DataError, match="drop --spark-master"):
            spark_session()
    finally:
        running.stop()
    assert environment_master() is None or "PYSPARK_SUBMIT_ARGS" in os.environ


@pytest.mark.slow
def test_spark_submit_master_is_honoured(tmp_path: Path) -> None:
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    job = tmp_path / "job.py"
    job.write_text(
        "from dpcube.engine.spark_engine import spark_session\n"
        "session = spark_session()\n"
        "print('MASTER', session.sparkContext.master, "
        "session.conf.get('spark.sql.shuffle.partitions'))\n"
        "session.stop()\n"
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    done = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(job)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # a builder that set local[*] would fail this; local[1] gets the local defaults (8 partitions)
    assert "MASTER local[1] 8" in done.stdout, done.stdout[-2000:]
