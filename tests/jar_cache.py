"""What the tests fetch once per machine, into one cache folder (``$FLINTLOCK_TEST_JARS``,
else ~/.cache/flintlock-test-jars): Apache Kafka's jars by Maven, pyspark builds by pip,
and Spark connectors by ``spark.jars.packages`` (Ivy, from Maven Central only).

Each folder is filled in a temporary folder beside it and renamed into place, so two
pytest processes filling it at once never leave a half-filled one; none is committed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def cache_folder() -> Path:
    return Path(os.environ.get("FLINTLOCK_TEST_JARS", Path.home() / ".cache/flintlock-test-jars"))


def fill_once(name: str, is_filled: Callable[[Path], bool], fill: Callable[[Path], None]) -> Path:
    """The cache's folder ``name``, filled by ``fill(partial)`` in a folder of this
    process's own, then renamed into place, unless ``is_filled`` finds it filled already."""
    target = cache_folder() / name
    if is_filled(target):
        return target
    partial = target.with_name(f"{name}.part-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        fill(partial)
        partial.rename(target)
    except OSError:  # another process filled it first
        if not is_filled(target):
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def pip_pyspark(version: str) -> Path:
    """A folder holding pyspark ``version`` (put it first on ``PYTHONPATH``)."""

    def install(partial: Path) -> None:
        pip = [sys.executable, "-m", "pip", "install", "-q", "--target", str(partial)]
        done = subprocess.run([*pip, f"pyspark=={version}"], capture_output=True, text=True)
        assert done.returncode == 0, f"installing pyspark {version} failed: {done.stderr[-2000:]}"

    return fill_once(
        f"pyspark-{version}", lambda folder: (folder / "pyspark/version.py").is_file(), install
    )


def pyspark_environment(version: str) -> dict[str, str]:
    """The environment of a process that runs pyspark ``version`` (first on its path,
    none of this process's Spark settings) with this interpreter, workers too."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK"))}
    environment["PYTHONPATH"] = str(pip_pyspark(version))
    options = environment.get("FLINTLOCK_DRIVER_JAVA_OPTIONS", "").split()
    shared = [o for o in options if not o.startswith("-XX:SharedArchiveFile=")]
    environment["FLINTLOCK_DRIVER_JAVA_OPTIONS"] = " ".join(shared)  # made for another Spark
    environment["PYSPARK_PYTHON"] = sys.executable
    return environment


POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>flintlock.tests</groupId>
  <artifactId>{name}</artifactId>
  <version>1</version>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""


def maven_jars(name: str, coordinates: list[str]) -> Path:
    """A folder whose ``jars/`` holds ``coordinates`` (``group:artifact:version``) and
    their runtime dependencies, copied from Maven Central by the machine's ``mvn``."""

    def copy(partial: Path) -> None:
        if shutil.which("mvn") is None:
            raise RuntimeError("mvn is not installed (it fetches the jars): apt-get install maven")
        dependencies = "\n".join(
            f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
            f"<version>{v}</version></dependency>"
            for g, a, v in (coordinate.split(":") for coordinate in coordinates)
        )
        pom = partial / "pom.xml"
        pom.write_text(POM.format(name=name, dependencies=dependencies))
        goal = ["dependency:copy-dependencies", "-DincludeScope=runtime"]
        done = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(pom), *goal, f"-DoutputDirectory={partial / 'jars'}"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"mvn could not fetch {coordinates}: {done.stdout[-3000:]}")

    return fill_once(name, lambda folder: (folder / "jars").is_dir(), copy)


IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <resolvers><ibiblio name="central" m2compatible="true"/></resolvers>
</ivysettings>
"""
"""Maven Central only (Ivy's default root): Spark's default chain also tries ~/.m2, where
another tool may have left a pom without its jar, and that fails the download."""


def spark_packages_options(packages: list[str], folder: Path) -> dict[str, str]:
    """Spark settings that fetch ``packages`` from Maven Central into the cache's Ivy
    folder (the settings file is written into ``folder``)."""
    settings = folder / "ivysettings.xml"
    settings.write_text(IVY_SETTINGS)
    return {
        "spark.jars.packages": ",".join(packages),
        "spark.jars.ivy": str(cache_folder()),
        "spark.jars.ivySettings": str(settings),
    }
