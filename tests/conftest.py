"""Shared test setup. pytest puts this folder on sys.path when it loads this file, so the tests in
every subfolder import the shared helpers (support.py, error_checks.py, ...)."""
