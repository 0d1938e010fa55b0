"""How figures read in messages, reports and baseline diffs: one way everywhere.

``fmt_value(5350.24)`` is ``5350.2`` (three significant digits below 1), ``fmt_pct(0.092)`` is ``9.2%``
(whole percents without a decimal), ``fmt_signed(-0.092)`` is ``-9.2%``.
"""

from __future__ import annotations


def fmt_value(value: float) -> str:
    """A figure: one decimal from 1 up, three significant digits below."""
    return f"{value:.1f}" if value >= 1 else f"{value:.3g}"


def fmt_pct(fraction: float) -> str:
    """A fraction as a percent to one decimal, without it where the percent is whole: ``9.2%``, ``5%``."""
    pct = round(fraction * 100, 1)
    return f"{pct:.0f}%" if pct.is_integer() else f"{pct:.1f}%"


def fmt_signed(fraction: float, percent: str = "%") -> str:
    """``-9.2%``, ``+0.4%`` (``percent=""``: ``-9.2``)."""
    return ("+" if fraction >= 0 else "-") + fmt_pct(abs(fraction)).removesuffix("%") + percent
