"""The project's exception tree.

``EmulatorError`` is the root of every error the project raises on purpose.  ``InputError`` and its
subclasses mean the user's input is wrong: the CLI prints the one-line message and exits 2.  Anything else
is an internal error (exit 1).  ``matcher.QueryError`` (a query that does not parse) is raised by the
matcher, which imports nothing from here; the CLI treats it as an input error too.  :func:`shown` is how a
message quotes the value it refuses.
"""

import math
import reprlib
from itertools import islice


class EmulatorError(Exception):
    """Root of the project's own errors."""


class InputError(EmulatorError):
    """The user's input (a file, a flag, a value) is wrong; the message names what and where."""


class ScenarioError(InputError):
    """A scenario file is invalid; the message names the file and the key path, e.g. ``a.yaml: streams[0].rate``."""


class PlanError(EmulatorError):
    """A plan breaks a rule every plan keeps (sharing/rules.py): a planner bug, named by epoch, flow or
    subscription."""


class EngineError(EmulatorError):
    """An execution engine (Spark, MQTT broker) could not start or failed while running."""


class _Short(reprlib.Repr):
    """``reprlib`` cut to about 60 characters and two levels, with integers too long to print shortened."""

    def __init__(self):
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = 60
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxset = 2, 4, 4, 4, 4

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 200:  # repr() of an integer past 4,300 digits raises; past 60 it is cut anyway
            return (
                f"<{'a negative' if x < 0 else 'an'} integer of about {int(x.bit_length() * math.log10(2)):,} digits>"
            )
        return super().repr_int(x, level)

    def repr_dict(self, x: dict, level: int) -> str:
        # as written: reprlib sorts the keys, and a message should quote the user's mapping in their order
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in islice(x.items(), self.maxdict)]
        return "{" + ", ".join(items + ["..."] * (len(x) > self.maxdict)) + "}"


_SHORT = _Short()


def shown(value: object) -> str:
    """``repr(value)`` as an error message quotes it: at most about 60 characters, never raising.

    A megabyte string, an alias bomb (a few hundred bytes of YAML, billions of list items) or an integer of
    thousands of digits must not be echoed whole into a one-line error.
    """
    return _SHORT.repr(value)
