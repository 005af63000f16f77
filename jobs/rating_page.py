"""Serve the rating page of a task set: raters open it in a browser and answer item by item.

    python -m conceptual.jobs.rating_page --tasks URI [--invite NAME ...] [--open] [--db URL]
        [--host 127.0.0.1] [--port 8300] [--allow-host NAME ...]

Raters are invited: `--invite ann bob` prints one unguessable link per name (the database
keeps only a hash of it; inviting a name again makes a new link and ends the old one), and
the page answers only invited raters. `--open` lets anyone who opens the page type a name
instead, for a trusted room. Each answer is stored the moment it is given in --db (default:
SQLite in the state folder, ratings.db; a team shares one database with any SQLAlchemy URL,
such as postgresql://user@host/ratings, with that database's driver installed). A rater who
closes the tab, or a restarted server, resumes at the same item. Every item goes to the task
set's number of distinct raters. Tabulate with `python -m conceptual.jobs.rating_results
--tasks URI`. The page listens on 127.0.0.1 unless --host says otherwise, and answers only
requests addressed to that host, localhost or a name given with --allow-host (the name
raters reach it by, behind a proxy or on a network).
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_verbose, location
from conceptual.jobs.runner import job_main, job_run

DEFAULT_PORT = 8300


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("rating_page", __doc__)
    parser.add_argument("--tasks", required=True, type=location, help="a rating_tasks output")
    parser.add_argument("--db", help="SQLAlchemy database URL (default: the state folder's SQLite)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on")
    parser.add_argument(
        "--invite", nargs="+", default=[], metavar="NAME", help="print a rating link for each"
    )
    parser.add_argument(
        "--open", action="store_true", help="anyone may type a name: for a trusted room only"
    )
    parser.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME",
        help="a host name raters reach the page by (repeatable)",
    )  # fmt: skip
    add_verbose(parser)
    args = parser.parse_args(argv)
    import sqlalchemy
    import uvicorn

    from conceptual.rating.page import LOCAL_HOSTS, normalized_name, rating_app
    from conceptual.rating.store import RatingStore, Refused, default_url
    from conceptual.rating.tasks import read_task_set
    from conceptual.storage import StorageError
    from conceptual.uris import redact

    refused = (StorageError, ValueError, Refused, sqlalchemy.exc.SQLAlchemyError)
    with job_run("rating_page", args.verbose, refused):
        tasks = read_task_set(args.tasks)
        store = RatingStore(tasks, args.db)
        links = {name: store.invite(name) for name in map(normalized_name, args.invite)}
        hosts = [args.host, *LOCAL_HOSTS, *args.allow_host]
        app = rating_app(store, open_raters=args.open, hosts=hosts)
    base = f"http://{args.allow_host[0] if args.allow_host else args.host}:{args.port}"
    print(f"rating:   {tasks.name} ({len(tasks.items)} items, {tasks.raters} raters each)")
    print(f"answers:  {redact(args.db or default_url())}")
    for name, token in links.items():
        print(f"invite:   {name}: {base}/rate/{token}  (give it to {name} alone)")
    if args.open:
        print("raters:   anyone who opens the page types a name (--open: a trusted room only)")
    else:
        print(f"raters:   {store.invitations()} invited; only their links are answered")
    print(f"page:     {base}/  (Ctrl-C stops it; answers are kept)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
