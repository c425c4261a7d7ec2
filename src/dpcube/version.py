"""The library's version, in the bottom layer so that any module can record it."""

__version__ = "0.1.0"
