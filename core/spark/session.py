"""The embedded local Spark session flintlock starts when none is given or active.

``env.execute()`` must run from any PySpark driver and from a plain ``python job.py``, so a
session given, active or configured outside flintlock (spark-submit, ``spark-defaults``)
is used as it is, and only otherwise a quiet local one is started. Java and the worker
Python are checked first, and the JVM's stderr goes to a log file, so what cannot run is
one SparkSetupError and task failures are reported by flintlock, not as Java traces."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

from flintlock.core.errors import SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


spark_log: str | None = None
"""The file that took the stderr of the JVM flintlock started (None if it started none)."""

QUIET_LOG4J = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark-log4j2.properties")


def check_java() -> None:
    """Fail with one actionable line if no Java is found (Spark needs Java 17+)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        if not os.path.exists(os.path.join(java_home, "bin", "java")):
            raise SparkSetupError(
                f"JAVA_HOME={java_home} has no bin/java: point it at a Java 17+ installation"
            )
        return
    if shutil.which("java") is None:
        raise SparkSetupError(
            "Spark needs Java 17+ and none was found: install one (e.g. "
            "'apt-get install openjdk-17-jre-headless') or set JAVA_HOME"
        )


def check_worker_python() -> None:
    """Fail early if the worker Python cannot import pyarrow (Spark's workers would)."""
    worker = os.environ.get("PYSPARK_PYTHON", sys.executable)
    if worker == sys.executable:
        return
    if shutil.which(worker) is None:
        raise SparkSetupError(f"PYSPARK_PYTHON={worker} is not an executable")
    probe = subprocess.run(
        [worker, "-c", "import pyarrow, flintlock"], capture_output=True, timeout=60
    )
    if probe.returncode != 0:
        raise SparkSetupError(
            f"the worker Python PYSPARK_PYTHON={worker} cannot import pyarrow and flintlock: "
            f"install them there, or unset PYSPARK_PYTHON to use {sys.executable}"
        )


def active_or_local_session(
    spark: SparkSession | None = None,
    master: str | None = None,
    spark_ui: bool = False,
    app_name: str = "flintlock",
) -> tuple[SparkSession, bool]:
    """The given or active session, or a new one; True if flintlock owns it.

    A new one takes Spark's configuration as it is where Spark was configured outside
    flintlock: under ``spark-submit`` (which started the JVM: its master, name and
    settings stand) or where ``PYSPARK_SUBMIT_ARGS``, ``spark-defaults.conf`` or
    ``MASTER`` names a master. Otherwise it is a quiet local one (``local[<cores>]``),
    named ``app_name``; ``spark_ui`` turns Spark's web UI on in it (on loopback, from
    port 4040). A ``master`` that differs from the configured one is refused."""
    from pyspark.sql import SparkSession

    if spark is not None:
        return spark, False
    active = SparkSession.getActiveSession() or _running_session()
    if active is not None:
        running = active.conf.get("spark.master", None)
        _check_same_master(master, running, "a SparkSession on master {running} is already active")
        return active, False
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    check_worker_python()
    if under_spark_submit():
        configured = _configured_master(None)
        _check_same_master(master, configured, "spark-submit started this driver on {running}")
        forwarded = executor_environment(_jvm_settings(STORAGE_SETTINGS))
        return SparkSession.builder.config(map={**forwarded}).getOrCreate(), True
    options = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "true" if spark_ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "ERROR",
        "spark.driver.memory": os.environ.get("FLINTLOCK_DRIVER_MEMORY", "2g"),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.extraJavaOptions": driver_java_options(),
    }
    launch_quiet_gateway(options)
    configured = _configured_master(SPARK_DEFAULT_MASTER)
    _check_same_master(master, configured, "Spark's configuration names the master {running}")
    forwarded = executor_environment(_jvm_settings(STORAGE_SETTINGS))
    builder = SparkSession.builder.config(map={**options, **forwarded})
    if configured is None:
        builder = builder.master(master or f"local[{os.cpu_count() or 2}]")
    return builder.getOrCreate(), True


def _running_session() -> SparkSession | None:
    """The session of a SparkContext this process already runs, though not active in this
    thread (a thread of the caller's, a py4j connection made anew): not flintlock's to
    stop at the job's end, whoever started it."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if getattr(SparkContext, "_active_spark_context", None) is None:
        return None
    return SparkSession.builder.getOrCreate()


SPARK_DEFAULT_MASTER = "local[*]"
"""The master spark-submit gives a JVM when nothing names one."""


def under_spark_submit() -> bool:
    """True if ``spark-submit`` (or the ``pyspark`` shell) started this Python and its
    JVM, whose configuration is the user's: PySpark connects to that JVM."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


STORAGE_ENVIRONMENT = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
)
"""What pyarrow's S3 and Azure file systems read from the environment (a file named by
an environment variable, as GOOGLE_APPLICATION_CREDENTIALS, would not be on executors)."""


def executor_environment(configured: dict[str, str | None]) -> dict[str, str]:
    """``spark.executorEnv.<NAME>`` for each storage variable the driver has and the
    Spark configuration (``configured``: setting -> value or None) does not set: what the
    user configured for executors stands. The values never reach a log of flintlock's;
    Spark's UI redacts the secret ones (``spark.redaction.regex``)."""
    settings = {}
    for name in STORAGE_ENVIRONMENT:
        key = f"spark.executorEnv.{name}"
        if name in os.environ and configured.get(key) is None:
            settings[key] = os.environ[name]
    return settings


STORAGE_SETTINGS = [f"spark.executorEnv.{name}" for name in STORAGE_ENVIRONMENT]


def _jvm_settings(keys: list[str]) -> dict[str, str | None]:
    """The running JVM's Spark settings of ``keys`` (spark-submit's ``--conf``,
    ``spark-defaults.conf``: system properties before a SparkContext exists)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    assert gateway is not None
    system = gateway.jvm.java.lang.System
    return {key: system.getProperty(key) for key in keys}


def _configured_master(default: str | None) -> str | None:
    """The master the running JVM was configured with (spark-submit's ``--master``,
    ``PYSPARK_SUBMIT_ARGS``, ``spark-defaults.conf``, ``MASTER``); None if none or only
    spark-submit's ``default``."""
    from pyspark import SparkContext

    if SparkContext._gateway is None:
        from pyspark.java_gateway import launch_gateway

        SparkContext._ensure_initialized(gateway=launch_gateway())
    gateway = SparkContext._gateway
    assert gateway is not None
    running = gateway.jvm.java.lang.System.getProperty("spark.master")
    return None if running is None or running == default else str(running)


def _check_same_master(wanted: str | None, running: str | None, where: str) -> None:
    """Refuse a ``master`` argument that differs from the master Spark already has."""
    if wanted is not None and running is not None and wanted != running:
        raise SparkSetupError(
            f"{where.format(running=running)} and cannot move to {wanted}: leave the "
            f"master out to use it, or stop it first"
        )


JAVA_OPTIONS_ENV = "FLINTLOCK_DRIVER_JAVA_OPTIONS"
"""JVM options the embedded session's driver starts with, after flintlock's quiet log
setting (e.g. ``-XX:TieredStopAtLevel=1``: short jobs start on less CPU)."""


def driver_java_options() -> str:
    """The embedded session's driver JVM options: the quiet log setting, then the user's."""
    extra = os.environ.get(JAVA_OPTIONS_ENV, "").strip()
    return f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J} {extra}".strip()


def spark_ui_url(spark: SparkSession) -> str | None:
    """The address of the session's Spark UI; None if it has none (or is Spark Connect)."""
    try:
        return spark.sparkContext.uiWebUrl
    except Exception:
        return None


def launch_quiet_gateway(options: dict[str, str]) -> None:
    """Start Spark's JVM with its stderr (start-up warnings, executor logs, Java stack
    traces) in a log file rather than on the terminal: flintlock reports task failures
    itself. Does nothing if this process already runs a JVM."""
    global spark_log
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in options.items():
        conf.set(key, value)
    path = os.path.join(tempfile.gettempdir(), f"flintlock-spark-{os.getpid()}.log")
    with open(path, "ab") as log:
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stderr": log})
        except Exception as error:
            raise SparkSetupError(
                f"Spark's JVM did not start ({type(error).__name__}); its last words, "
                f"from {path}:\n{_tail(path)}"
            ) from None
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    spark_log = path


def _tail(path: str, lines: int = 15) -> str:
    with open(path, errors="replace") as log:
        return "".join(log.readlines()[-lines:])
