"""tuplemesh: Storm-style worker messaging in Python (disruptor rings inside, transports between)."""

__version__ = "0.1.0"
