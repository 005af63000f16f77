"""Serve the rating page of a task set: raters open it in a browser and answer item by item.

    python -m conceptual.jobs.rating_page --tasks URI [--db URL] [--host 127.0.0.1]
        [--port 8300]

Each answer is stored the moment it is given in --db (default: SQLite in the state folder,
ratings.db; a team shares one database with any SQLAlchemy URL, such as
postgresql://user@host/ratings, with that database's driver installed). A rater who closes
the tab, or a restarted server, resumes at the same item. Every item goes to the task set's
number of distinct raters. Tabulate with `python -m conceptual.jobs.rating_results --tasks URI`.
The page listens on 127.0.0.1 unless --host says otherwise (put it behind a proxy with
authentication before opening it to a network).
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, job_main, location, stopping

DEFAULT_PORT = 8300


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser(
        prog="python -m conceptual.jobs.rating_page", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--tasks", required=True, type=location, help="a rating_tasks output")
    parser.add_argument("--db", help="SQLAlchemy database URL (default: the state folder's SQLite)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on")
    args = parser.parse_args(argv)
    import sqlalchemy
    import uvicorn

    from conceptual.rating.page import rating_app
    from conceptual.rating.store import default_url
    from conceptual.rating.tasks import read_task_set
    from conceptual.storage import StorageError
    from conceptual.uris import redact

    with stopping((StorageError, ValueError, sqlalchemy.exc.SQLAlchemyError)):
        tasks = read_task_set(args.tasks)
        app = rating_app(tasks, args.db)
    print(f"rating:   {tasks.name} ({len(tasks.items)} items, {tasks.raters} raters each)")
    print(f"answers:  {redact(args.db or default_url())}")
    print(
        f"page:     http://{args.host}:{args.port}/  (Ctrl-C stops it; answers are kept)",
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
