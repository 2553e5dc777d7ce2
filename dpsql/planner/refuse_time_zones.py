"""Time-zone-aware values are refused at every entry point (one message for all).

A release's date and timestamp attributes have no time zone: the spec refuses bounds
with an offset, and the data's timestamps are wall-clock values in whatever time the
curator's source recorded them in, which the release does not say. A value with a time
zone (a Python ``datetime`` with ``tzinfo``, a PostgreSQL TIMESTAMPTZ parameter, a string
like ``'2013-01-02 05:30:00+02'``) could only be compared with them by guessing that
time: converting it to UTC moves every boundary by the data's offset whenever the data
is not in UTC, a wrong count with no error. So such a value is refused, and the message
says how to write the timestamp in the data's own time.
"""

from __future__ import annotations

from datetime import datetime

from dpsql.errors import NotSupportedError


def refuse_time_zone(value: datetime, what: str = "parameter") -> None:
    """Raise :class:`~dpsql.errors.NotSupportedError` if ``value`` has a time zone."""
    if value.tzinfo is None or value.utcoffset() is None:
        return
    raise NotSupportedError(
        f"{what} {value.isoformat(sep=' ')} has a time zone (UTC offset "
        f"{value.strftime('%z') or value.tzname()}), but the release's dates and "
        "timestamps have none, and dpsql does not know which time its data was recorded "
        "in, so it cannot convert; send a timestamp without a time zone, written in the "
        "data's own time (a TIMESTAMP, not a TIMESTAMPTZ; in Python "
        "value.astimezone(zone).replace(tzinfo=None))")


__all__ = ["refuse_time_zone"]
