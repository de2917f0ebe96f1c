"""tiledsl's version: what packages, caches and Thunder executors record."""

__version__ = "0.1.0"
