"""Helpers shared by every tier of the tests (the `tests` folder is on sys.path)."""
