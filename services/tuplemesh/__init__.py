"""tuplemesh: Storm-style worker messaging in Python (disruptor rings inside, transports between)."""

import os

from tuplemesh._compiled import PURE_PYTHON_ENV, compiled_modules, use_pure_python

__all__ = ["__version__", "compiled_modules"]

__version__ = "0.1.0"

if os.environ.get(PURE_PYTHON_ENV):
    use_pure_python()
