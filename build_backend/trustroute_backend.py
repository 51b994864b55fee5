"""The build backend: setuptools' own (``setuptools.build_meta``), without one notice.

An editable install (``pip install -e .``) of this layout, where the repository root is
the package folder (``package-dir = {"trustroute" = "."}``), makes setuptools use its
import finder, and setuptools then always warns "Editable installation ... Please be
careful with folders in your working directory with the same name as your package".
The finder maps ``trustroute`` to this folder explicitly; the notice is the same for every
project of this layout and says nothing about this one, so the editable build drops it.
Every other warning of the build is kept. Named in pyproject.toml (``backend-path``).
"""

from __future__ import annotations

import warnings
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403  (the whole PEP 517/660 interface)

#: the start of the notice's text (setuptools.warnings.InformationOnly, a UserWarning)
NOTICE = "Editable installation"


def build_editable(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                   metadata_directory: str | None = None) -> str:
    """``setuptools.build_meta.build_editable`` without the notice above."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=NOTICE, category=UserWarning)
        name: str = build_meta.build_editable(wheel_directory, config_settings,
                                              metadata_directory)
    return name
