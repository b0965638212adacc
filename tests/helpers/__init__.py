"""Helpers shared by the test files (imported as ``tests.helpers``; pyproject puts the
repository root on pytest's path)."""
