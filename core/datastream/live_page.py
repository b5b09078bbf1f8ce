"""``execute(ui_port=...)``: the job's live page (``flintlock ui``), from its start.

The page lives in the package root (``flintlock/ui/``), which core/ never imports: the
root registers how to start it here (``register_starter``) when ``flintlock`` is imported,
so the dependencies still point one way (ARCHITECTURE.md, section 2)."""

from __future__ import annotations

import contextlib
import os
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from flintlock.core.errors import GraphError
from flintlock.core.spark.job_group import link_page
from flintlock.core.spark.session import spark_ui_url
from flintlock.core.storage.options import StorageOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

UI_PORT_ENV = "FLINTLOCK_UI_PORT"
"""``flintlock run --ui PORT`` sets it; ``execute`` reads it when not given ``ui_port``."""

Starter = Callable[[str, str, StorageOptions, int], contextlib.AbstractContextManager[str]]
"""(checkpoint dir, job name, storage options, port) -> the page, serving while entered,
its address as the value."""

_starters: list[Starter] = []


def register_starter(starter: Starter) -> None:
    """How ``execute`` starts a job's page (the package root registers flintlock's)."""
    _starters[:] = [starter]


def ui_port_option(ui_port: int | None) -> int | None:
    """``ui_port``, else ``FLINTLOCK_UI_PORT``'s; a port that is no port is an error."""
    if ui_port is None:
        text = os.environ.get(UI_PORT_ENV, "")
        if not text:
            return None
        try:
            ui_port = int(text)
        except ValueError:
            raise GraphError(f"{UI_PORT_ENV}={text!r} is no port number") from None
    if isinstance(ui_port, bool) or not isinstance(ui_port, int) or not 0 <= ui_port < 65536:
        raise GraphError(f"ui_port must be a port number (0: any free one), not {ui_port!r}")
    return ui_port


@contextlib.contextmanager
def live_page(
    port: int | None,
    checkpoint_dir: str,
    job_name: str,
    options: StorageOptions,
    spark: SparkSession | None = None,
) -> Iterator[None]:
    """Show the job's page on ``port`` (loopback) from the block's start; its address
    goes to standard error, and where ``spark`` has a UI, its epochs' descriptions there
    link to the page. Nothing when ``port`` is None."""
    if port is None:
        yield
        return
    if not _starters:
        raise GraphError("ui_port needs flintlock's web page: import flintlock first")
    with _starters[0](checkpoint_dir, job_name, options, port) as url:
        print(f"flintlock ui: {url} (job '{job_name}', read-only)", file=sys.stderr, flush=True)
        linked = spark is not None and link_spark_ui(spark, job_name, url)
        try:
            yield
        finally:
            if linked:
                link_page(job_name, None)


SPARK_UI_PATH = "/flintlock/"
"""Where Spark's UI leads to a job's live page: ``/flintlock/<job name, quoted>``."""

_redirects: dict[str, Any] = {}
"""Path -> the redirect handler attached to Spark's UI (one per job name and process)."""


def link_spark_ui(spark: SparkSession, job_name: str, url: str) -> bool:
    """Have Spark's UI lead ``/flintlock/<job>`` to the job's page, ``url`` (a redirect:
    Spark draws only root-relative links in a description), and the job's epochs'
    descriptions link it. False where the session has no UI (or is Spark Connect); a
    Spark whose UI takes no redirect is said on standard error."""
    if spark_ui_url(spark) is None:
        return False
    path = SPARK_UI_PATH + urllib.parse.quote(job_name, safe="")
    try:
        context = spark.sparkContext
        jetty = context._jvm.org.apache.spark.ui.JettyUtils  # type: ignore[union-attr]
        ui = context._jsc.sc().ui().get()
        defaults = [getattr(jetty, f"createRedirectHandler$default${n}")() for n in (3, 5, 6)]
        handler = jetty.createRedirectHandler(path, url, defaults[0], "", *defaults[1:])
        if path in _redirects:  # the job's earlier page, on another port
            ui.detachHandler(_redirects.pop(path))
        ui.attachHandler(handler)
        _redirects[path] = handler
    except Exception as error:  # Spark's UI is Spark's own: a link is no reason to fail
        print(
            f"flintlock ui: Spark's UI does not link to the page of '{job_name}' "
            f"({type(error).__name__}: {error})",
            file=sys.stderr,
            flush=True,
        )
        return False
    link_page(job_name, path)
    return True
