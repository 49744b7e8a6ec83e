"""peers package."""
