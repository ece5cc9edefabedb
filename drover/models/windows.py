"""Time windows: when the migrations on a cluster may take new steps. Pure.

A window is ``DAYS HH:MM-HH:MM [ZONE]``: days as ``Mon-Fri``, ``Sat,Sun``, ``Mon`` or ``daily``; a start and an end
in the zone's wall clock (an end at or before the start runs into the next day, so ``22:00-06:00`` is a night); an
IANA zone (``Europe/Berlin``), UTC if none. ``Mon-Fri 22:00-06:00`` opens Monday to Friday at 22:00 and closes at
06:00 the morning after, Saturday's included. Several windows add up. Daylight saving is the zone's: a window is
its wall-clock times on each day.
"""

import re
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from drover.models.admission import MoveSpec
from drover.models.throttle import Throttle
from drover.models.units import human_bytes

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_SPEC = re.compile(r"^\s*(\S+)\s+(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})(?:\s+(\S+))?\s*$")


class Window(BaseModel):
    model_config = ConfigDict(frozen=True)

    days: tuple[int, ...]
    start: time
    end: time
    zone: str = "UTC"
    text: str

    def intervals(self, around: datetime) -> list[tuple[datetime, datetime]]:
        """Its openings from two days before ``around`` to eight days after, as aware datetimes."""
        tz = ZoneInfo(self.zone)
        local = around.astimezone(tz).date()
        found = []
        for offset in range(-2, 9):
            day = local + timedelta(days=offset)
            if day.weekday() not in self.days:
                continue
            opens = _at(day, self.start, tz)
            closes = _at(day + timedelta(days=1) if self.end <= self.start else day, self.end, tz)
            found.append((opens, closes))
        return found


def _at(day: date, at: time, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, at, tzinfo=tz)


def parse_window(text: str) -> Window:
    """A window from its text; ValueError naming what is wrong."""
    m = _SPEC.match(text)
    if m is None:
        raise ValueError(f"window {text!r}: give DAYS HH:MM-HH:MM [ZONE], like 'Mon-Fri 22:00-06:00 Europe/Berlin'")
    days_text, h1, m1, h2, m2, zone = m.groups()
    try:
        start, end = time(int(h1), int(m1)), time(int(h2), int(m2))
    except ValueError:
        raise ValueError(f"window {text!r}: times run from 00:00 to 23:59") from None
    zone = zone or "UTC"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"window {text!r}: unknown time zone {zone!r} (give an IANA name, like Europe/Berlin)"
        ) from None
    return Window(days=_days(text, days_text), start=start, end=end, zone=zone, text=text.strip())


def _days(text: str, spec: str) -> tuple[int, ...]:
    if spec.lower() in ("daily", "*"):
        return tuple(range(7))
    days: set[int] = set()
    for part in spec.lower().split(","):
        first, _, last = part.partition("-")
        if first[:3] not in DAYS or (last and last[:3] not in DAYS):
            raise ValueError(f"window {text!r}: days are Mon..Sun, a range (Mon-Fri), a list (Sat,Sun) or daily")
        a, b = DAYS.index(first[:3]), DAYS.index((last or first)[:3])
        days |= {(a + i) % 7 for i in range((b - a) % 7 + 1)}
    return tuple(sorted(days))


class Windows(BaseModel):
    """The cluster's windows (none: always open), and the throttle cap outside them (None: no new step outside)."""

    model_config = ConfigDict(frozen=True)

    texts: list[str] = []
    outside_rate: int | None = Field(None, ge=1)

    @field_validator("texts")
    @classmethod
    def _parsed(cls, texts: list[str]) -> list[str]:
        return [parse_window(t).text for t in texts]

    def _openings(self, now: datetime) -> list[tuple[datetime, datetime]]:
        """Every window's openings from two days before ``now`` to eight days after."""
        return [span for t in self.texts for span in parse_window(t).intervals(now)]

    def is_open(self, now: datetime) -> bool:
        return not self.texts or _inside(now, self._openings(now))

    def next_change(self, now: datetime) -> datetime | None:
        """When the windows next open or close (within a week), or None without windows."""
        openings = self._openings(now)
        state = _inside(now, openings)
        # Overlapping windows: an edge inside another window changes nothing; the first that does is the one.
        edges = sorted({e for a, b in openings for e in (a, b) if e > now})
        return next((e for e in edges if _inside(e, openings) != state), None)

    def text(self) -> str:
        if not self.texts:
            return "none (always open)"
        outside = (
            f"{human_bytes(self.outside_rate)}/s outside them" if self.outside_rate else "no new step outside them"
        )
        return "; ".join(self.texts) + f" ({outside})"


def _inside(at: datetime, openings: list[tuple[datetime, datetime]]) -> bool:
    return any(a <= at < b for a, b in openings)


# Each move in flight with the throttle its migration asks for.
Asked = list[tuple[MoveSpec, Throttle]]


def capped(asked: Asked, cap: int | None) -> Asked:
    """Each move's rates (one, or per broker: leader, follower) held to ``cap``; an unthrottled move gets the cap."""
    if cap is None:
        return asked
    return [(m, t.capped(cap)) for m, t in asked]
