"""The project's exception tree.

``EmulatorError`` is the root of every error the project raises on purpose.  ``InputError`` and its
subclasses mean the user's input is wrong: the CLI prints the one-line message and exits 2.  Anything else
is an internal error (exit 1).  ``matcher.QueryError`` (a query that does not parse) is raised by the
matcher, which imports nothing from here; the CLI treats it as an input error too.
"""


class EmulatorError(Exception):
    """Root of the project's own errors."""


class InputError(EmulatorError):
    """The user's input (a file, a flag, a value) is wrong; the message names what and where."""


class ScenarioError(InputError):
    """A scenario file is invalid; the message names the file and the key path, e.g. ``a.yaml: streams[0].rate``."""


class EngineError(EmulatorError):
    """An execution engine (Spark, MQTT broker) could not start or failed while running."""
