"""The export stage."""
