"""setuptools' build backend, without its one warning that flintlock's layout answers.

flintlock maps ``flintlock.core`` to ``core/`` and its kin (ARCHITECTURE.md section 2),
so setuptools installs it editable through a meta path finder, and that strategy always
warns that a folder named like the package in the working directory may take precedence
during imports. Here it cannot: ``flintlock/`` in the checkout *is* the package root,
and its ``__init__`` maps the checkout's subpackages itself. Every other message of
setuptools passes unchanged.
"""

from __future__ import annotations

import warnings
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 - every hook of the backend, as it is
from setuptools.warnings import InformationOnly


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """setuptools' editable build, without the finder strategy's folder warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"Editable installation\.", InformationOnly)
        return build_meta.build_editable(wheel_directory, config_settings, metadata_directory)
