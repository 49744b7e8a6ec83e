"""Bandwidth, latency and buffer sizes as scenario files write them (docs/SCENARIOS.md).

Bandwidth: a number is bit/s; a string carries a unit, ``"64Kbit"``, ``"100Mbit"``, ``"1.5Gbit"``
(decimal prefixes, case-insensitive, an optional ``/s``).  Latency: a number is seconds; a string carries
``s``, ``ms`` or ``us``.  Latencies stay exact :class:`fractions.Fraction` values taken from the decimal
text, because route ties (docs/ACCOUNTING.md) must be decided exactly: ``0.1 + 0.2`` seconds of links must
tie with one ``0.3`` second link.  A buffer size: a number is bytes; a string carries ``B``, ``KB``,
``MB`` or ``GB`` (decimal, as the report counts bytes) or ``KiB``, ``MiB``, ``GiB`` (binary).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, localcontext
from fractions import Fraction

from topologies.errors import shown

NUMBER_PATTERN = r"(?P<number>[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?))"
_BANDWIDTH = re.compile(rf"\s*{NUMBER_PATTERN}\s*(?P<unit>[kmg]?bit)(?:/s)?\s*", re.IGNORECASE)
_LATENCY = re.compile(rf"\s*{NUMBER_PATTERN}\s*(?P<unit>s|ms|us)\s*")
_SIZE = re.compile(rf"\s*{NUMBER_PATTERN}\s*(?P<unit>[kmg]i?b|b)\s*", re.IGNORECASE)
_SIZE_FACTORS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
MAX_BUFFER = 10**9  # bytes: a link direction holding more than a gigabyte waiting is a unit mistake
_BANDWIDTH_FACTORS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
_LATENCY_FACTORS = {"s": Fraction(1), "ms": Fraction(1, 10**3), "us": Fraction(1, 10**6)}
MIN_BANDWIDTH = 0.001  # bit/s
MAX_BANDWIDTH = 1e15  # bit/s (1 Pbit/s)
MAX_LATENCY = 86_400  # seconds: a link slower than a day to cross is a unit mistake
# A latency's text is read exactly: Fraction("1e-999999999") would build a billion-digit integer, and one of
# thousands of digits cannot even be printed.  These bound the exact value whatever its float says.
MAX_LATENCY_DIGITS = 40  # characters before the exponent
MAX_LATENCY_EXPONENT_DIGITS = 3


def _is_number(value: object) -> bool:
    # bool is an int subclass, but `latency: true` is a mistake, not one second
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_float(value: int | float) -> float:
    """``float(value)``, infinity for an integer too large for a float (never OverflowError)."""
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits
        return math.inf


def parse_bandwidth(value: object) -> float:
    """Bits per second of ``value`` (a positive number or a string such as ``"100Mbit"``).

    Raises ValueError with a message naming the problem (not the key: the caller knows it).
    """
    if _is_number(value):
        bandwidth = as_float(value)
    elif isinstance(value, str):
        match = _BANDWIDTH.fullmatch(value)
        if match is None:
            raise ValueError(f"bad bandwidth {shown(value)} (expected bit/s or a number with Kbit, Mbit or Gbit)")
        # float first: a huge exponent is rejected by magnitude before any exact arithmetic
        bandwidth = float(match["number"]) * _BANDWIDTH_FACTORS[match["unit"].lower()]
        if math.isfinite(bandwidth) and MIN_BANDWIDTH <= bandwidth <= MAX_BANDWIDTH:
            bandwidth = float(Fraction(match["number"]) * _BANDWIDTH_FACTORS[match["unit"].lower()])
    else:
        raise ValueError(f"bad bandwidth {shown(value)} (expected a number or a string such as '100Mbit')")
    if bandwidth <= 0:
        raise ValueError(f"bandwidth must be positive, got {shown(value)}")
    if not MIN_BANDWIDTH <= bandwidth <= MAX_BANDWIDTH:  # NaN and infinity too
        raise ValueError(f"bandwidth must be between {MIN_BANDWIDTH:g} bit/s and 1 Pbit/s, got {shown(value)}")
    return bandwidth


def parse_latency(value: object) -> Fraction:
    """Seconds of ``value`` (a number >= 0 or a string such as ``"2ms"``), exact.

    A float is read through its shortest decimal text (``0.002`` is exactly 1/500).  Raises ValueError.
    """
    if _is_number(value):
        if not math.isfinite(as_float(value)):
            raise ValueError(f"latency must be finite, got {shown(value)}")
        if value > MAX_LATENCY:  # before exact arithmetic on an integer of thousands of digits
            raise ValueError(f"latency must be at most {MAX_LATENCY:,} s, got {shown(value)}")
        latency = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    elif isinstance(value, str):
        match = _LATENCY.fullmatch(value)
        if match is None:
            raise ValueError(f"bad latency {shown(value)} (expected seconds or a number with s, ms or us)")
        if not abs(float(match["number"]) * _LATENCY_FACTORS[match["unit"]]) <= MAX_LATENCY:
            # checked on the float: Fraction("1e999999999") would compute a billion-digit integer
            raise ValueError(f"latency must be at most {MAX_LATENCY:,} s, got {shown(value)}")
        digits, _, exponent = match["number"].lower().partition("e")
        exponent = exponent.lstrip("+-").lstrip("0")
        if len(digits) > MAX_LATENCY_DIGITS or len(exponent) > MAX_LATENCY_EXPONENT_DIGITS:
            raise ValueError(
                f"bad latency {shown(value)} (more than {MAX_LATENCY_DIGITS} digits,"
                f" or an exponent of more than {MAX_LATENCY_EXPONENT_DIGITS})"
            )
        latency = Fraction(match["number"]) * _LATENCY_FACTORS[match["unit"]]
    else:
        raise ValueError(f"bad latency {shown(value)} (expected a number or a string such as '2ms')")
    if latency < 0:
        raise ValueError(f"latency must not be negative, got {shown(value)}")
    if latency > MAX_LATENCY:
        raise ValueError(f"latency must be at most {MAX_LATENCY:,} s, got {shown(value)}")
    return latency


def latency_text(seconds: Fraction) -> str:
    """``seconds`` as the exact text :func:`parse_latency` reads back to the same fraction, in ms
    (``"0.30815ms"``).  Raises ValueError for a fraction with no finite decimal expansion (a latency read
    from decimal text, or rounded to nanoseconds, always has one)."""
    places = next((k for k in range(64) if (seconds * 10**k).denominator == 1), None)
    if places is None:
        raise ValueError(f"{seconds} s has no short finite decimal expansion")
    with localcontext(prec=200):  # the default 28 digits would round a long expansion
        millis = Decimal(int(seconds * 10**places)).scaleb(3 - places)
    text = format(millis, "f")
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "ms"


def parse_size(value: object) -> float:
    """Bytes of ``value`` (a positive number or a string such as ``"64KB"``), a whole number.

    Raises ValueError with a message naming the problem (not the key: the caller knows it).
    """
    if _is_number(value):
        size = as_float(value)
    elif isinstance(value, str):
        match = _SIZE.fullmatch(value)
        if match is None:
            raise ValueError(
                f"bad size {shown(value)} (expected bytes or a number with B, KB, MB, GB, KiB, MiB or GiB)"
            )
        size = float(match["number"]) * _SIZE_FACTORS[match["unit"].lower()]
    else:
        raise ValueError(f"bad size {shown(value)} (expected a number of bytes or a string such as '64KB')")
    if not 1 <= size <= MAX_BUFFER:  # NaN and infinity too; fractions of a byte are dropped, never all of it
        raise ValueError(f"size must be at least 1 byte and at most 1 GB, got {shown(value)}")
    return float(math.floor(size))
