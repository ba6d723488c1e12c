"""The DRF vendor's own application, writing orders through the Django ORM.

Run as a script with the Django project's environment (:func:`vendors.drf_env`). This is
how a real database-backed API changes: its application code saves a model inside a
transaction (``auto_now`` stamps ``updated_at`` at ``save()``), then does more work
before the commit. Writing through the ORM, in the vendor's own process and threads,
keeps what the vendor's own code does (stamps taken before a lock wait, one ``UPDATE``
for a bulk action) instead of a model of it.

- ``--initial N`` creates orders 1..N in one transaction first (and exits when
  ``--seconds`` is 0);
- ``--threads`` workers then, until ``--seconds`` have passed, each open a transaction,
  update (62%), create (14%), delete (16%) or re-create (8%: a deleted id comes back) one
  order, and hold the transaction open 0.5-3 s before committing; an update that meets a
  row another transaction holds waits for it, with its stamp already taken;
- at each of ``--bulk-at`` (seconds from the start) one transaction gives ``--bulk-size``
  orders one stamp (a bulk action), held open like the others.

It prints one JSON line of counts at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import django

django.setup()

from django.db import DatabaseError, connection, transaction  # noqa: E402 (after setup())
from django.db.models import F  # noqa: E402
from django.utils import timezone  # noqa: E402
from drf_site.shop.models import Order  # noqa: E402

STATUSES = ("new", "paid", "packed", "shipped", "returned")


class Book:
    """What the writers believe exists (the database stays the truth)."""

    def __init__(self, live: set[int], next_id: int) -> None:
        self.lock = threading.Lock()
        self.live = live
        self.gone: dict[int, int] = {}  # deleted id -> its last version
        self.next_id = next_id
        self.counts = dict.fromkeys(
            ("update", "create", "delete", "recreate", "bulk", "conflict"), 0
        )

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1


def seed(n: int) -> None:
    with transaction.atomic():
        Order.objects.bulk_create(
            Order(id=i, customer=f"c{i % 17}", status="new", amount=Decimal(i % 90) + 10, version=1)
            for i in range(1, n + 1)
        )


def hold(rng: random.Random) -> None:
    time.sleep(rng.uniform(0.5, 3.0))


def update(book: Book, rng: random.Random) -> None:
    with book.lock:
        if not book.live:
            return
        target = rng.choice(sorted(book.live))
    with transaction.atomic():
        order = Order.objects.filter(pk=target).first()
        if order is None:
            return
        order.status = rng.choice(STATUSES)
        order.amount = Decimal(rng.randint(100, 99_999)) / 100
        order.version = F("version") + 1  # type: ignore[assignment]
        order.save(update_fields=["status", "amount", "version", "updated_at"])
        hold(rng)
    book.count("update")


def create(book: Book, rng: random.Random) -> None:
    with book.lock:
        identity = book.next_id
        book.next_id += 1
    with transaction.atomic():
        Order.objects.create(
            id=identity,
            customer=f"c{rng.randint(0, 16)}",
            status="new",
            amount=Decimal(25),
            version=1,
        )
        hold(rng)
    with book.lock:
        book.live.add(identity)
    book.count("create")


def delete(book: Book, rng: random.Random) -> None:
    with book.lock:
        if len(book.live) < 20:
            return
        target = rng.choice(sorted(book.live))
        book.live.discard(target)
    with transaction.atomic():
        # Locked first, so the version remembered is the one deleted (a bulk update may
        # have committed since the order was chosen).
        order = Order.objects.select_for_update().filter(pk=target).first()
        if order is None:
            return
        order.delete()
        hold(rng)
    with book.lock:
        book.gone[target] = order.version
    book.count("delete")


def recreate(book: Book, rng: random.Random) -> None:
    with book.lock:
        if not book.gone:
            return
        target = rng.choice(sorted(book.gone))
        version = book.gone.pop(target)
    with transaction.atomic():
        # The same order number comes back; its version goes on from the deleted one, so
        # every state of an order has a version of its own.
        Order.objects.create(
            id=target, customer="back", status="new", amount=Decimal(30), version=version + 1
        )
        hold(rng)
    with book.lock:
        book.live.add(target)
    book.count("recreate")


def bulk(book: Book, rng: random.Random, size: int) -> None:
    with book.lock:
        chosen = sorted(rng.sample(sorted(book.live), min(size, len(book.live))))
    with transaction.atomic():
        Order.objects.filter(id__in=chosen).update(
            updated_at=timezone.now(), version=F("version") + 1, status="bulk"
        )
        hold(rng)
    book.count("bulk")


def worker(book: Book, seed_value: int, until: float) -> None:
    rng = random.Random(seed_value)
    try:
        while time.monotonic() < until:
            roll = rng.random()
            action = (
                update
                if roll < 0.62
                else create
                if roll < 0.76
                else delete
                if roll < 0.92
                else recreate
            )
            try:
                action(book, rng)
            except DatabaseError:
                book.count("conflict")  # the row went away, or came back, meanwhile
    finally:
        connection.close()


def bulk_worker(book: Book, seed_value: int, started: float, at: list[float], size: int) -> None:
    rng = random.Random(seed_value)
    try:
        for offset in at:
            time.sleep(max(0.0, started + offset - time.monotonic()))
            try:
                bulk(book, rng, size)
            except DatabaseError:
                book.count("conflict")
    finally:
        connection.close()


def main(args: argparse.Namespace) -> None:
    if args.initial:
        seed(args.initial)
    if args.seconds <= 0:
        print(json.dumps({"seeded": args.initial}), flush=True)
        return
    live = set(Order.objects.values_list("id", flat=True))
    book = Book(live, max(live, default=0) + 1)
    connection.close()
    started = time.monotonic()
    until = started + args.seconds
    threads = [
        threading.Thread(target=worker, args=(book, args.seed * 1000 + n, until))
        for n in range(args.threads)
    ]
    bulk_at = [float(x) for x in args.bulk_at.split(",") if x]
    threads.append(
        threading.Thread(
            target=bulk_worker,
            args=(book, args.seed * 1000 + 999, started, bulk_at, args.bulk_size),
        )
    )
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps(book.counts), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--initial", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bulk-at", default="")
    parser.add_argument("--bulk-size", type=int, default=150)
    main(parser.parse_args())
