"""The installed version of real2sim (one place; pyproject reads the same number)."""
__version__ = "0.1.0"
