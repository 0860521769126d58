"""Calendar scheduling: people, rooms and events; find a common free slot and book it."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

from llmgym.envs.tools.scenario import (
    Module,
    Planner,
    Rule,
    ToolError,
    family,
    full,
    like,
    one,
    people,
    rows,
)

SCHEMA = """
CREATE TABLE persons (person_id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL);
CREATE TABLE rooms (room_id TEXT PRIMARY KEY, name TEXT NOT NULL, capacity INTEGER NOT NULL);
CREATE TABLE events (event_id INTEGER PRIMARY KEY, title TEXT NOT NULL, day TEXT NOT NULL,
                     start_min INTEGER NOT NULL, end_min INTEGER NOT NULL, room_id TEXT);
CREATE TABLE attendees (event_id INTEGER NOT NULL, person_id INTEGER NOT NULL);
"""
DAYS = ("2024-03-18", "2024-03-19", "2024-03-20", "2024-03-21", "2024-03-22")
ROOMS = (
    ("R1", "Fjord", 4),
    ("R2", "Summit", 6),
    ("R3", "Harbor", 8),
    ("R4", "Atrium", 12),
    ("R5", "Loft", 3),
)
OPEN, CLOSE = 9 * 60, 17 * 60


def hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _minutes(text: str) -> int:
    try:
        h, m = text.strip().split(":")
        value = int(h) * 60 + int(m)
    except ValueError:
        raise ToolError(f"times are 'HH:MM', got {text!r}") from None
    if not (0 <= int(h) < 24 and 0 <= int(m) < 60):
        raise ToolError(f"no such time {text!r}")
    return value


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    cast = people(db_seed)[:38]
    for i, person in enumerate(cast, 1):
        db.execute(
            "INSERT INTO persons VALUES (?, ?, ?)",
            (i, full(person), f"{person[0]}.{i}@acme.example".lower()),
        )
    db.executemany("INSERT INTO rooms VALUES (?, ?, ?)", ROOMS)
    topics = ("Standup", "Review", "Planning", "1:1", "Interview", "Sync", "Workshop")
    for _ in range(140):
        day = rng.choice(DAYS)
        start = rng.randrange(OPEN // 30, CLOSE // 30 - 1) * 30
        end = start + rng.choice((30, 30, 60, 60, 90))
        room = rng.choice([r[0] for r in ROOMS])
        clash = one(
            db,
            "SELECT 1 FROM events WHERE room_id = ? AND day = ? AND start_min < ? AND end_min > ?",
            (room, day, end, start),
        )
        cur = db.execute(
            "INSERT INTO events (title, day, start_min, end_min, room_id) VALUES (?, ?, ?, ?, ?)",
            (rng.choice(topics), day, start, end, None if clash else room),
        )
        for pid in rng.sample(range(1, len(cast) + 1), rng.randrange(1, 4)):
            db.execute("INSERT INTO attendees VALUES (?, ?)", (cur.lastrowid, pid))


def find_person(db: sqlite3.Connection, name: str) -> list[dict[str, Any]]:
    """People in the calendar system whose name contains the text.

    Args:
        name: Part of the person's name.
    """
    return rows(
        db,
        "SELECT person_id, name, email FROM persons WHERE name LIKE ? ESCAPE '\\' ORDER BY person_id LIMIT 10",
        (like(name.strip()),),
    )


def list_events(db: sqlite3.Connection, person_id: int, day: str) -> list[dict[str, Any]]:
    """A person's events on a day (start and end as HH:MM).

    Args:
        person_id: Person id.
        day: Date as YYYY-MM-DD.
    """
    found = rows(
        db,
        "SELECT e.event_id, e.title, e.start_min, e.end_min, e.room_id FROM events e "
        "JOIN attendees a USING (event_id) WHERE a.person_id = ? AND e.day = ? ORDER BY e.start_min",
        (person_id, day.strip()),
    )
    for r in found:
        r["start"], r["end"] = hhmm(r.pop("start_min")), hhmm(r.pop("end_min"))
    return found


def list_rooms(db: sqlite3.Connection, min_capacity: int = 1) -> list[dict[str, Any]]:
    """Meeting rooms with at least this many seats, smallest first.

    Args:
        min_capacity: Seats needed.
    """
    return rows(
        db,
        "SELECT room_id, name, capacity FROM rooms WHERE capacity >= ? ORDER BY capacity, room_id",
        (min_capacity,),
    )


def room_schedule(db: sqlite3.Connection, room_id: str, day: str) -> list[dict[str, Any]]:
    """Bookings of a room on a day.

    Args:
        room_id: Room id such as "R2".
        day: Date as YYYY-MM-DD.
    """
    found = rows(
        db,
        "SELECT event_id, title, start_min, end_min FROM events WHERE room_id = ? AND day = ? "
        "ORDER BY start_min",
        (room_id.strip(), day.strip()),
    )
    for r in found:
        r["start"], r["end"] = hhmm(r.pop("start_min")), hhmm(r.pop("end_min"))
    return found


def create_event(
    db: sqlite3.Connection,
    title: str,
    day: str,
    start: str,
    end: str,
    room_id: str,
    attendee_ids: list[int],
) -> dict[str, Any]:
    """Book a meeting in a room for the given people.

    Args:
        title: Meeting title.
        day: Date as YYYY-MM-DD.
        start: Start time HH:MM.
        end: End time HH:MM.
        room_id: Room to book.
        attendee_ids: Person ids of the attendees.
    """
    s, e = _minutes(start), _minutes(end)
    if e <= s:
        raise ToolError("end must be after start")
    if day.strip() not in DAYS:
        raise ToolError(f"the calendar is open for {DAYS[0]} to {DAYS[-1]}")
    if one(db, "SELECT 1 FROM rooms WHERE room_id = ?", (room_id.strip(),)) is None:
        raise ToolError(f"no room {room_id!r}")
    if one(
        db,
        "SELECT 1 FROM events WHERE room_id = ? AND day = ? AND start_min < ? AND end_min > ?",
        (room_id.strip(), day.strip(), e, s),
    ):
        raise ToolError(f"room {room_id} is booked then")
    if not attendee_ids or len(set(attendee_ids)) != len(attendee_ids):
        raise ToolError("list each attendee once")
    for pid in attendee_ids:
        if one(db, "SELECT 1 FROM persons WHERE person_id = ?", (pid,)) is None:
            raise ToolError(f"no person {pid}")
    cur = db.execute(
        "INSERT INTO events (title, day, start_min, end_min, room_id) VALUES (?, ?, ?, ?, ?)",
        (title.strip(), day.strip(), s, e, room_id.strip()),
    )
    for pid in attendee_ids:
        db.execute("INSERT INTO attendees VALUES (?, ?)", (cur.lastrowid, pid))
    return {
        "event_id": cur.lastrowid,
        "day": day.strip(),
        "start": hhmm(s),
        "end": hhmm(e),
        "room_id": room_id.strip(),
    }


def cancel_event(db: sqlite3.Connection, event_id: int) -> dict[str, Any]:
    """Delete an event.

    Args:
        event_id: Event id.
    """
    if one(db, "SELECT 1 FROM events WHERE event_id = ?", (event_id,)) is None:
        raise ToolError(f"no event {event_id}")
    db.execute("DELETE FROM attendees WHERE event_id = ?", (event_id,))
    db.execute("DELETE FROM events WHERE event_id = ?", (event_id,))
    return {"event_id": event_id, "cancelled": True}


def _hours_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name != "create_event":
        return None
    try:
        s, e = _minutes(str(args.get("start"))), _minutes(str(args.get("end")))
    except ToolError:
        return None
    if s < OPEN or e > CLOSE:
        return "booked a meeting outside working hours"
    busy = [
        pid
        for pid in args.get("attendee_ids", [])
        if one(
            db,
            "SELECT 1 FROM events ev JOIN attendees a USING (event_id) WHERE a.person_id = ? AND ev.day = ? "
            "AND ev.start_min < ? AND ev.end_min > ?",
            (pid, str(args.get("day", "")).strip(), e, s),
        )
    ]
    if busy:
        return f"double-booked attendee(s) {busy}"
    return None


MODULE = Module(
    "scheduling",
    SCHEMA,
    seed,
    (find_person, list_events, list_rooms, room_schedule, create_event, cancel_event),
    {
        "events": "SELECT e.title, e.day, e.start_min, e.end_min, e.room_id, (SELECT group_concat(person_id, ',') "
        "FROM (SELECT person_id FROM attendees a WHERE a.event_id = e.event_id ORDER BY person_id)) FROM events e",
    },
    (
        Rule(
            "cal_hours",
            "Meetings must lie within working hours (09:00-17:00) and never double-book an attendee.",
            _hours_rule,
        ),
    ),
)


# --- planning helpers (also used by workflows) ------------------------------------------------------


def busy(db: sqlite3.Connection, person_ids: list[int], day: str) -> list[tuple[int, int]]:
    return [
        (r["start_min"], r["end_min"])
        for r in db.execute(
            f"SELECT e.start_min, e.end_min FROM events e JOIN attendees a USING (event_id) "
            f"WHERE e.day = ? AND a.person_id IN ({','.join('?' * len(person_ids))})",
            (day, *person_ids),
        )
    ]


def earliest_slot(
    db: sqlite3.Connection, person_ids: list[int], day: str, length: int, seats: int
) -> tuple[int, str] | None:
    """The earliest half-hour start when everyone and some room of ``seats`` is free (smallest room)."""
    taken = busy(db, person_ids, day)
    rooms = db.execute(
        "SELECT room_id FROM rooms WHERE capacity >= ? ORDER BY capacity, room_id", (seats,)
    ).fetchall()
    for start in range(OPEN, CLOSE - length + 1, 30):
        end = start + length
        if any(s < end and e > start for s, e in taken):
            continue
        for (room,) in rooms:
            if not one(
                db,
                "SELECT 1 FROM events WHERE room_id = ? AND day = ? AND start_min < ? AND end_min > ?",
                (room, day, end, start),
            ):
                return start, room
    return None


def plan_meeting(
    p: Planner, names: list[str], title: str, day: str, length: int
) -> tuple[int, str] | None:
    """Gold calls for booking ``title``: find each person, read calendars and rooms, create it."""
    ids = []
    with p.parallel():
        for name in names:
            found = p.call("find_person", name=name)
            ids.append(next(r["person_id"] for r in found if r["name"] == name))
    slot = earliest_slot(p.db, ids, day, length, len(ids))
    if slot is None:
        return None
    with p.parallel():
        for pid in ids:
            p.call("list_events", person_id=pid, day=day)
    rooms = p.call("list_rooms", min_capacity=len(ids))
    with p.parallel():
        for room in rooms:
            p.call("room_schedule", room_id=room["room_id"], day=day)
            if room["room_id"] == slot[1]:
                break
    start, room = slot
    p.call(
        "create_event",
        title=title,
        day=day,
        start=hhmm(start),
        end=hhmm(start + length),
        room_id=room,
        attendee_ids=sorted(ids),
    )
    return slot


def _meeting(p: Planner) -> str:
    cast = p.q(
        "SELECT * FROM persons p WHERE (SELECT count(*) FROM persons q WHERE q.name = p.name) = 1"
    )
    for _ in range(50):
        k = 2 + round(p.difficulty * 2)
        names = [r["name"] for r in p.rng.sample(cast, k)]
        day = p.rng.choice(p.difficulty >= 0.5 and DAYS[:2] or DAYS)
        length = p.rng.choice((30, 60)) if p.difficulty >= 0.3 else 30
        title = f"{p.rng.choice(('Budget', 'Launch', 'Hiring', 'Roadmap', 'Vendor'))} {p.rng.choice(('review', 'sync', 'kickoff'))}"
        probe = earliest_slot(
            p.db, [r["person_id"] for r in cast if r["name"] in names], day, length, k
        )
        if probe is not None:
            break
    slot = plan_meeting(p, names, title, day, length)
    assert slot is not None
    room = one(p.db, "SELECT name FROM rooms WHERE room_id = ?", (slot[1],))
    assert room is not None
    p.fact(hhmm(slot[0]), f"{slot[0] // 60}:{slot[0] % 60:02d}")
    p.fact(room["name"])
    return (
        f"Book a {length}-minute meeting titled '{title}' on {day} with {', '.join(names)}. Use the earliest "
        "start time (on the hour or half hour) at which all of them are free, in the smallest room that seats "
        "everyone and is free then (ties: lowest room id). Tell me the start time and the room name."
    )


FAMILIES = [
    family(
        "calendar_schedule",
        ["scheduling"],
        _meeting,
        "Find the earliest common free slot and a room; book it.",
        distractor_modules=["hr", "travel"],
    ),
]
