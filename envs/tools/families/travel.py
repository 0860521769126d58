"""Travel booking: flights and hotels under a company travel policy."""

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
    money,
    one,
    people,
    rows,
)

FLIGHT_CAP, HOTEL_CAP = 60_000, 25_000
SCHEMA = """
CREATE TABLE flights (flight_id TEXT PRIMARY KEY, origin TEXT NOT NULL, destination TEXT NOT NULL, day TEXT NOT NULL,
                      depart TEXT NOT NULL, price_cents INTEGER NOT NULL, seats_left INTEGER NOT NULL);
CREATE TABLE hotels (hotel_id TEXT PRIMARY KEY, city TEXT NOT NULL, name TEXT NOT NULL, nightly_cents INTEGER NOT NULL,
                     rating REAL NOT NULL, rooms_left INTEGER NOT NULL);
CREATE TABLE bookings (booking_id INTEGER PRIMARY KEY, traveler TEXT NOT NULL, kind TEXT NOT NULL, ref TEXT NOT NULL,
                       day TEXT NOT NULL, nights INTEGER NOT NULL, price_cents INTEGER NOT NULL, status TEXT NOT NULL);
"""
CITIES = ("BOS", "SFO", "ORD", "SEA", "AUS", "DEN", "JFK")
CITY_NAMES = {
    "BOS": "Boston",
    "SFO": "San Francisco",
    "ORD": "Chicago",
    "SEA": "Seattle",
    "AUS": "Austin",
    "DEN": "Denver",
    "JFK": "New York",
}
DAYS = ("2024-03-25", "2024-03-26", "2024-03-27")
HOTEL_WORDS = ("Grand", "Harbor", "Central", "Park", "Union", "Maple", "Summit")


def seed(db: sqlite3.Connection, rng: random.Random, db_seed: int) -> None:
    n = 100
    for origin in CITIES:
        for dest in CITIES:
            if origin == dest:
                continue
            for day in DAYS:
                for _ in range(rng.randrange(1, 4)):
                    n += rng.randrange(1, 7)
                    db.execute(
                        "INSERT INTO flights VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            f"FL{n}",
                            origin,
                            dest,
                            day,
                            f"{rng.randrange(6, 21):02d}:{rng.choice(('00', '30'))}",
                            rng.randrange(90, 900) * 100 + 99,
                            rng.choice((0, 3, 9, 40)),
                        ),
                    )
    h = 0
    for city in CITIES:
        for word in rng.sample(HOTEL_WORDS, 4):
            h += 1
            db.execute(
                "INSERT INTO hotels VALUES (?, ?, ?, ?, ?, ?)",
                (
                    f"H{h:03d}",
                    city,
                    f"{word} {CITY_NAMES[city]} Hotel",
                    rng.randrange(90, 420) * 100,
                    rng.randrange(30, 50) / 10,
                    rng.choice((0, 2, 7)),
                ),
            )


def search_flights(
    db: sqlite3.Connection, origin: str, destination: str, day: str
) -> list[dict[str, Any]]:
    """Flights on a day between two airports (codes like "BOS"), cheapest first.

    Args:
        origin: Departure airport code.
        destination: Arrival airport code.
        day: Date as YYYY-MM-DD.
    """
    found = rows(
        db,
        "SELECT flight_id, origin, destination, day, depart, price_cents, seats_left FROM flights "
        "WHERE origin = ? AND destination = ? AND day = ? ORDER BY price_cents, flight_id",
        (origin.strip().upper(), destination.strip().upper(), day.strip()),
    )
    for r in found:
        r["price"] = money(r.pop("price_cents"))
    return found


def search_hotels(db: sqlite3.Connection, city: str) -> list[dict[str, Any]]:
    """Hotels in a city (airport code), best rated first, with nightly price and rooms left.

    Args:
        city: Airport code of the city, e.g. "SEA".
    """
    found = rows(
        db,
        "SELECT hotel_id, name, nightly_cents, rating, rooms_left FROM hotels WHERE city = ? "
        "ORDER BY rating DESC, nightly_cents",
        (city.strip().upper(),),
    )
    for r in found:
        r["nightly_price"] = money(r.pop("nightly_cents"))
    return found


def book_flight(db: sqlite3.Connection, flight_id: str, traveler: str) -> dict[str, Any]:
    """Book one seat on a flight.

    Args:
        flight_id: Flight id such as "FL123".
        traveler: Traveler's full name.
    """
    f = one(db, "SELECT * FROM flights WHERE flight_id = ?", (flight_id.strip().upper(),))
    if f is None:
        raise ToolError(f"no flight {flight_id!r}")
    if f["seats_left"] < 1:
        raise ToolError(f"flight {f['flight_id']} is full")
    db.execute(
        "UPDATE flights SET seats_left = seats_left - 1 WHERE flight_id = ?", (f["flight_id"],)
    )
    cur = db.execute(
        "INSERT INTO bookings (traveler, kind, ref, day, nights, price_cents, status) "
        "VALUES (?, 'flight', ?, ?, 0, ?, 'confirmed')",
        (traveler.strip(), f["flight_id"], f["day"], f["price_cents"]),
    )
    return {
        "booking_id": cur.lastrowid,
        "flight_id": f["flight_id"],
        "price": money(f["price_cents"]),
    }


def book_hotel(
    db: sqlite3.Connection, hotel_id: str, traveler: str, check_in: str, nights: int
) -> dict[str, Any]:
    """Book a hotel room.

    Args:
        hotel_id: Hotel id such as "H012".
        traveler: Traveler's full name.
        check_in: Date as YYYY-MM-DD.
        nights: Number of nights (1-14).
    """
    h = one(db, "SELECT * FROM hotels WHERE hotel_id = ?", (hotel_id.strip().upper(),))
    if h is None:
        raise ToolError(f"no hotel {hotel_id!r}")
    if not 1 <= nights <= 14:
        raise ToolError("nights must be 1-14")
    if h["rooms_left"] < 1:
        raise ToolError(f"{h['name']} is fully booked")
    db.execute("UPDATE hotels SET rooms_left = rooms_left - 1 WHERE hotel_id = ?", (h["hotel_id"],))
    total = h["nightly_cents"] * nights
    cur = db.execute(
        "INSERT INTO bookings (traveler, kind, ref, day, nights, price_cents, status) "
        "VALUES (?, 'hotel', ?, ?, ?, ?, 'confirmed')",
        (traveler.strip(), h["hotel_id"], check_in.strip(), nights, total),
    )
    return {"booking_id": cur.lastrowid, "hotel": h["name"], "total": money(total)}


def list_bookings(db: sqlite3.Connection, traveler: str) -> list[dict[str, Any]]:
    """A traveler's bookings.

    Args:
        traveler: Traveler's full name.
    """
    found = rows(
        db,
        "SELECT booking_id, kind, ref, day, nights, price_cents, status FROM bookings "
        "WHERE lower(traveler) = lower(?) ORDER BY booking_id",
        (traveler.strip(),),
    )
    for r in found:
        r["price"] = money(r.pop("price_cents"))
    return found


def cancel_booking(db: sqlite3.Connection, booking_id: int) -> dict[str, Any]:
    """Cancel a booking.

    Args:
        booking_id: Booking id.
    """
    b = one(db, "SELECT * FROM bookings WHERE booking_id = ?", (booking_id,))
    if b is None or b["status"] == "cancelled":
        raise ToolError(f"no active booking {booking_id}")
    db.execute("UPDATE bookings SET status = 'cancelled' WHERE booking_id = ?", (booking_id,))
    table, key, col = (
        ("flights", "flight_id", "seats_left")
        if b["kind"] == "flight"
        else ("hotels", "hotel_id", "rooms_left")
    )
    db.execute(f"UPDATE {table} SET {col} = {col} + 1 WHERE {key} = ?", (b["ref"],))
    return {"booking_id": booking_id, "status": "cancelled"}


def _policy_rule(db: sqlite3.Connection, name: str, args: Any) -> str | None:
    if name == "book_flight":
        f = one(
            db,
            "SELECT price_cents FROM flights WHERE flight_id = ?",
            (str(args.get("flight_id", "")).strip().upper(),),
        )
        if f is not None and f["price_cents"] > FLIGHT_CAP:
            return f"booked a flight above {money(FLIGHT_CAP)}"
    if name == "book_hotel":
        h = one(
            db,
            "SELECT nightly_cents FROM hotels WHERE hotel_id = ?",
            (str(args.get("hotel_id", "")).strip().upper(),),
        )
        if h is not None and h["nightly_cents"] > HOTEL_CAP:
            return f"booked a hotel above {money(HOTEL_CAP)} a night"
    return None


MODULE = Module(
    "travel",
    SCHEMA,
    seed,
    (search_flights, search_hotels, book_flight, book_hotel, list_bookings, cancel_booking),
    {
        "bookings": "SELECT lower(traveler), kind, ref, day, nights, price_cents, status FROM bookings",
        "flights": "SELECT flight_id, seats_left FROM flights",
        "hotels": "SELECT hotel_id, rooms_left FROM hotels",
    },
    (
        Rule(
            "travel_policy",
            f"Flights may cost at most ${money(FLIGHT_CAP)} and hotels at most "
            f"${money(HOTEL_CAP)} per night.",
            _policy_rule,
        ),
    ),
)


def cheapest_flight(db: sqlite3.Connection, origin: str, dest: str, day: str) -> sqlite3.Row | None:
    return one(
        db,
        "SELECT * FROM flights WHERE origin = ? AND destination = ? AND day = ? AND seats_left > 0 "
        "AND price_cents <= ? ORDER BY price_cents, flight_id LIMIT 1",
        (origin, dest, day, FLIGHT_CAP),
    )


def _trip(p: Planner) -> str:
    traveler = full(p.rng.choice(people(p.db_seed)[:30]))
    for _ in range(100):
        origin, dest = p.rng.sample(CITIES, 2)
        day = p.rng.choice(DAYS)
        flight = cheapest_flight(p.db, origin, dest, day)
        if flight is not None:
            break
    assert flight is not None
    p.call("search_flights", origin=origin, destination=dest, day=day)
    booked = p.call("book_flight", flight_id=flight["flight_id"], traveler=traveler)
    p.fact(booked["flight_id"])
    ask = (
        f"Book {traveler} on the cheapest flight from {CITY_NAMES[origin]} ({origin}) to {CITY_NAMES[dest]} "
        f"({dest}) on {day} that has seats and is within policy."
    )
    if p.difficulty >= 0.4:
        nights = p.rng.randrange(1, 5)
        hotel = one(
            p.db,
            "SELECT * FROM hotels WHERE city = ? AND rooms_left > 0 AND nightly_cents <= ? "
            "ORDER BY rating DESC, nightly_cents, hotel_id LIMIT 1",
            (dest, HOTEL_CAP),
        )
        if hotel is not None:
            p.call("search_hotels", city=dest)
            stay = p.call(
                "book_hotel",
                hotel_id=hotel["hotel_id"],
                traveler=traveler,
                check_in=day,
                nights=nights,
            )
            p.fact(stay["hotel"])
            p.fact(money(flight["price_cents"] + hotel["nightly_cents"] * nights))
            ask += (
                f" Also book {nights} night(s) from {day} at the best-rated hotel there with a free room "
                "that is within policy (ties: cheaper). Tell me the flight id, the hotel name and the total "
                "cost of flight plus hotel."
            )
            return ask
    return ask + " Tell me the flight id."


FAMILIES = [
    family(
        "travel_book",
        ["travel"],
        _trip,
        "Book the cheapest allowed flight and the best allowed hotel.",
        distractor_modules=["expenses", "scheduling"],
    ),
]
