"""network package."""
