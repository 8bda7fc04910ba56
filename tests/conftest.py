"""Shared test configuration: the draguard pytest plugin is loaded through its pytest11 entry point."""

pytest_plugins = ["pytester"]
