"""A class-data-sharing archive of the test drivers' JVM (the JDK's dynamic CDS, JDK 13+):
the classes Spark's driver loads, parsed and verified once per machine, then mapped by
every test JVM. A driver then starts in ~6 s instead of ~10 s (session, first job and
first Python task on two cores), and the suite starts hundreds of them (each killed
driver of the chaos suites is one). Spark's semantics do not change.

Made on first use into the test cache (tests/jar_cache.py) by running flintlock's main
example with ``-XX:ArchiveClassesAtExit``, keyed by the Java build and the pyspark install,
its jars' sizes and times included (an archive only fits the JDK and the class path it
was made with)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from jar_cache import fill_once

ARCHIVE = "driver.jsa"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "orders_job.py"


def archive_option(java_options: str) -> str:
    """``-XX:SharedArchiveFile=...`` of an archive made with ``java_options``."""
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    jars = _jars_as_installed(Path(pyspark.__file__).parent / "jars")
    key = hashlib.sha256(f"{java}|{pyspark.__file__}|{jars}|{java_options}".encode()).hexdigest()
    folder = fill_once(
        f"jvm-class-archive-{key[:16]}",
        lambda folder: (folder / ARCHIVE).is_file(),
        lambda partial: _make(partial / ARCHIVE, java_options),
    )
    return f"-XX:SharedArchiveFile={folder / ARCHIVE}"


def _jars_as_installed(folder: Path) -> str:
    """Each of Spark's jars with its size and time: the JVM refuses an archive (with a
    warning on standard output) once a jar on its class path is not the one it was made
    with, e.g. pyspark installed again at the same path by a fresh venv."""
    found = sorted(
        (jar.name, jar.stat().st_size, jar.stat().st_mtime_ns) for jar in folder.glob("*.jar")
    )
    return repr(found)


def _make(archive: Path, java_options: str) -> None:
    """Run the main example in a JVM that writes ``archive`` when it exits."""
    environment = {
        **os.environ,
        "FLINTLOCK_DRIVER_JAVA_OPTIONS": f"{java_options} -XX:ArchiveClassesAtExit={archive}",
        "PYSPARK_PYTHON": sys.executable,
    }
    with tempfile.TemporaryDirectory(prefix="flintlock-cds-") as output:
        done = subprocess.run(
            [sys.executable, __file__, output], capture_output=True, text=True, env=environment
        )
    if done.returncode != 0 or not archive.is_file():
        raise RuntimeError(
            f"the test JVMs' class archive {archive} was not made (exit {done.returncode}): "
            f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )


def _run_example_and_wait_for_the_jvm(output: str) -> None:
    """The example's job, then the JVM's exit awaited: it writes the archive as it exits."""
    import runpy

    from pyspark import SparkContext

    runpy.run_path(str(EXAMPLE), run_name="flintlock_cds")["main"](output)
    gateway = SparkContext._gateway
    context = SparkContext._active_spark_context
    if context is not None:
        context.stop()
    if gateway is not None and gateway.proc is not None:
        gateway.proc.stdin.close()  # the JVM exits on its stdin's end (PythonGatewayServer)
        gateway.proc.wait(timeout=120)


if __name__ == "__main__":
    _run_example_and_wait_for_the_jvm(sys.argv[1])
