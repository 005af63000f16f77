"""Where the rating page keeps answers: a database SQLAlchemy reaches (by default SQLite in the
state folder, `ratings.db`; a team points every page at one server with `--db URL`).

Two tables. `answers`: one row per answer (task set, item, rater, answer, seconds the item
was on screen, when), written and committed the moment it is given, unique per task set,
item and rater. `assignments`: the item each rater has on screen, so that a closed tab or a
restarted server shows the same item again, and so that items being rated count towards
their raters: each item goes to `raters` distinct raters, in the task set's order, and an
item is handed out again only once an assignment has been left for HOLD_S.

Everything a request changes happens in one transaction under one lock, and every check
(unknown item, answered twice, not the item shown, an item with all its answers, not an
answer) comes before the first write: a refused request changes nothing. On SQLite each
transaction takes the database's write lock as it begins (BEGIN IMMEDIATE), so page servers
in several processes on one file take turns: an item never gets more than `raters` answers.
(On a database server, the same holds for the servers sharing one process's lock only.)

Raters are invited (`invite`): each gets an unguessable link token, of which the database
keeps only the SHA-256. `csrf_key` is a secret the page signs its forms with, one per
database, so that every page server on it accepts the others' forms. A SQLite file is
created the owner's alone (0600; SQLite gives its journal the file's mode), since that key
forges any rater's forms.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from conceptual.paths import state_dir
from conceptual.rating.tasks import TaskSet

HOLD_S = 30 * 60  # an item left on screen this long may go to another rater

metadata = sa.MetaData()
answers = sa.Table(
    "answers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_set", sa.String(64), nullable=False),
    sa.Column("item_id", sa.String(64), nullable=False),
    sa.Column("rater", sa.String(64), nullable=False),
    sa.Column("answer", sa.String(64), nullable=False),
    sa.Column("seconds", sa.Float, nullable=False),  # from the item's first showing
    sa.Column("answered_at", sa.Float, nullable=False),  # Unix time
    sa.UniqueConstraint("task_set", "item_id", "rater", name="one_answer_per_rater"),
)
assignments = sa.Table(
    "assignments",
    metadata,
    sa.Column("task_set", sa.String(64), primary_key=True),
    sa.Column("rater", sa.String(64), primary_key=True),
    sa.Column("item_id", sa.String(64), nullable=False),
    sa.Column("shown_at", sa.Float, nullable=False),
)

raters = sa.Table(
    "raters",
    metadata,
    sa.Column("task_set", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
    sa.Column("invited_at", sa.Float, nullable=False),
)
keys = sa.Table(
    "page_keys",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.String(64), nullable=False),
)


def default_url() -> str:
    return f"sqlite:///{state_dir() / 'ratings.db'}"


class Refused(Exception):
    """A request the store turns down, changing nothing; `status` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Progress:
    answered: int  # by this rater
    left: int  # items this rater may still get
    complete: int  # items with all their raters
    items: int


class RatingStore:
    """The answers to one task set, in the database at `url`."""

    def __init__(self, tasks: TaskSet, url: str | None = None) -> None:
        self.tasks = tasks
        self.items = tasks.by_id()
        self.order = [item["item_id"] for item in tasks.items]
        self.engine = sa.create_engine(url or default_url())
        if self.engine.dialect.name == "sqlite":
            create_owners_alone(self.engine.url.database)
            take_write_lock_first(self.engine)
        metadata.create_all(self.engine)
        self.lock = threading.Lock()

    def invite(self, name: str) -> str:
        """A new link token for the rater `name` (its SHA-256 stored; an older one of theirs
        stops working); the token itself is returned once and kept nowhere."""
        token = secrets.token_urlsafe(24)
        row = {"token_sha256": digest(token), "invited_at": time.time()}
        with self.lock, self.engine.begin() as connection:
            connection.execute(
                raters.delete().where(raters.c.task_set == self.tasks.name, raters.c.name == name)
            )
            connection.execute(raters.insert().values(task_set=self.tasks.name, name=name, **row))
        return token

    def invited(self, token: str) -> str | None:
        """The name of the rater the link token was given to, or None."""
        with self.engine.begin() as connection:
            return connection.execute(
                sa.select(raters.c.name).where(
                    raters.c.task_set == self.tasks.name, raters.c.token_sha256 == digest(token)
                )
            ).scalar()

    def invitations(self) -> int:
        with self.engine.begin() as connection:
            query = sa.select(sa.func.count()).where(raters.c.task_set == self.tasks.name)
            return connection.execute(query.select_from(raters)).scalar_one()

    def csrf_key(self) -> bytes:
        """The secret the page signs its forms with: made once per database."""
        with self.lock, self.engine.begin() as connection:
            value = connection.execute(
                sa.select(keys.c.value).where(keys.c.name == "csrf")
            ).scalar()
            if value is None:
                value = secrets.token_hex(32)
                connection.execute(keys.insert().values(name="csrf", value=value))
        return bytes.fromhex(value)

    def _answered(self, connection: sa.Connection) -> list[tuple[str, str]]:
        """(item, rater) of every answer to this task set."""
        rows = connection.execute(
            sa.select(answers.c.item_id, answers.c.rater).where(
                answers.c.task_set == self.tasks.name
            )
        )
        return [tuple(row) for row in rows]

    def _answers_to(self, connection: sa.Connection, item_id: str) -> int:
        return connection.execute(
            sa.select(sa.func.count())
            .select_from(answers)
            .where(answers.c.task_set == self.tasks.name, answers.c.item_id == item_id)
        ).scalar_one()

    def _held(self, connection: sa.Connection, rater: str, now: float) -> list[str]:
        """The items other raters have had on screen for less than HOLD_S."""
        rows = connection.execute(
            sa.select(assignments.c.item_id).where(
                assignments.c.task_set == self.tasks.name,
                assignments.c.rater != rater,
                assignments.c.shown_at > now - HOLD_S,
            )
        )
        return [row[0] for row in rows]

    def _assignment(self, connection: sa.Connection, rater: str) -> Any:
        return connection.execute(
            sa.select(assignments).where(
                assignments.c.task_set == self.tasks.name, assignments.c.rater == rater
            )
        ).first()

    def _open_items(self, connection: sa.Connection, rater: str, now: float) -> list[str]:
        """The items `rater` may be given, in the task set's order: not answered by them, and
        with fewer than `raters` answers and assignments."""
        answered = self._answered(connection)
        taken = Counter(item for item, _ in answered) + Counter(self._held(connection, rater, now))
        mine = {item for item, who in answered if who == rater}
        return [i for i in self.order if i not in mine and taken.get(i, 0) < self.tasks.raters]

    def current(self, rater: str) -> str | None:
        """The item on `rater`'s screen: the one they were shown and have not answered, else
        the next open item (assigned to them now), or None when they are done."""
        now = time.time()
        with self.lock, self.engine.begin() as connection:
            shown = self._assignment(connection, rater)
            if shown is not None:
                # Held past HOLD_S, it may have gone to others who answered it meanwhile.
                if self._answers_to(connection, shown.item_id) < self.tasks.raters:
                    return shown.item_id
                connection.execute(self._unassign(rater))
            open_items = self._open_items(connection, rater, now)
            if not open_items:
                return None
            values = {"task_set": self.tasks.name, "rater": rater, "shown_at": now}
            connection.execute(assignments.insert().values(item_id=open_items[0], **values))
            return open_items[0]

    def answer(self, rater: str, item_id: str, answer: str) -> str:
        """Store `rater`'s answer to the item on their screen; returns the stored form."""
        now = time.time()
        with self.lock, self.engine.begin() as connection:
            if item_id not in self.items:
                raise Refused(404, f"no item {item_id!r} in task set {self.tasks.name}")
            mine = (item_id, rater)
            if mine in set(self._answered(connection)):
                raise Refused(409, f"{rater} has already answered item {item_id}")
            shown = self._assignment(connection, rater)
            if shown is None or shown.item_id != item_id:
                raise Refused(409, f"item {item_id} is not the item {rater} was shown")
            if self._answers_to(connection, item_id) >= self.tasks.raters:
                raise Refused(409, f"item {item_id} has all its {self.tasks.raters} answers")
            try:
                stored = self.tasks.kind.parse(answer, self.items[item_id])
            except ValueError as exc:
                raise Refused(400, str(exc)) from None
            connection.execute(
                answers.insert().values(
                    task_set=self.tasks.name,
                    item_id=item_id,
                    rater=rater,
                    answer=stored,
                    seconds=round(now - shown.shown_at, 3),
                    answered_at=now,
                )
            )
            connection.execute(self._unassign(rater))
            return stored

    def undo(self, rater: str) -> str:
        """Delete `rater`'s latest answer and show that item again; returns its id."""
        now = time.time()
        with self.lock, self.engine.begin() as connection:
            last = connection.execute(
                sa.select(answers.c.id, answers.c.item_id)
                .where(answers.c.task_set == self.tasks.name, answers.c.rater == rater)
                .order_by(answers.c.id.desc())
                .limit(1)
            ).first()
            if last is None:
                raise Refused(409, f"{rater} has no answer to undo")
            connection.execute(answers.delete().where(answers.c.id == last.id))
            connection.execute(self._unassign(rater))
            values = {"task_set": self.tasks.name, "rater": rater, "shown_at": now}
            connection.execute(assignments.insert().values(item_id=last.item_id, **values))
            return last.item_id

    def _unassign(self, rater: str) -> sa.Delete:
        return assignments.delete().where(
            assignments.c.task_set == self.tasks.name, assignments.c.rater == rater
        )

    def progress(self, rater: str) -> Progress:
        with self.engine.connect() as connection:
            answered = self._answered(connection)
            left = self._open_items(connection, rater, time.time())
        mine = sum(1 for _, who in answered if who == rater)
        return Progress(mine, len(left), self._complete(answered), len(self.order))

    def _complete(self, answered: list[tuple[str, str]]) -> int:
        """Items with all their raters."""
        counts = Counter(item for item, _ in answered)
        return sum(1 for n in counts.values() if n >= self.tasks.raters)

    def overview(self) -> dict[str, int]:
        """For whoever runs the study: how far it is, without any answer."""
        with self.engine.connect() as connection:
            answered = self._answered(connection)
        return {
            "items": len(self.order),
            "complete": self._complete(answered),
            "answers": len(answered),
            "raters": len({rater for _, rater in answered}),
        }

    def ratings(self) -> list[dict[str, Any]]:
        """Every answer to this task set: rater, item_id, answer, seconds, answered_at."""
        columns = [answers.c[name] for name in ("rater", "item_id", "answer", "seconds")]
        query = sa.select(*columns, answers.c.answered_at).where(
            answers.c.task_set == self.tasks.name
        )
        with self.engine.connect() as connection:
            return [dict(row._mapping) for row in connection.execute(query.order_by(answers.c.id))]


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_owners_alone(database: str | None) -> None:
    """Create the SQLite file `database` mode 0600 unless it exists (or is in memory), so
    that sqlite3 does not create it under the umask (0644, readable by every user)."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    with contextlib.suppress(FileExistsError):  # an existing one keeps the mode it has
        os.close(os.open(database, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def take_write_lock_first(engine: sa.Engine) -> None:
    """Every transaction on this SQLite engine begins with BEGIN IMMEDIATE: it waits for
    (up to the driver's timeout) and takes the database's write lock before it reads, so
    transactions in other processes cannot read the same counts and both write. Python's
    sqlite3 would otherwise begin a transaction only at its first write."""

    @sa.event.listens_for(engine, "connect")
    def _own_transactions(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # the driver issues no BEGIN of its own

    @sa.event.listens_for(engine, "begin")
    def _immediate(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
