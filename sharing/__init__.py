"""sharing package."""
