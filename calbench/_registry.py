"""Inspect AI loads this module (the package entry point): it registers ``calbench/calbench``."""

from .inspect_task import calbench  # noqa: F401

