"""The service process: the job table behind an HTTP API on a private Unix socket.

Run as ``python -m tuner.service.server`` (clients start it on demand, in
its own session, so a terminal hang-up does not reach it). One per user: a
second copy finds the lock taken and exits at once. It ends itself after
``--idle`` seconds with no job queued or running and no request, and removes
its socket. The socket is created under umask 077 (mode 0600) in a 0700
directory: only the user can submit work.

API (JSON unless said otherwise): ``GET /health``; ``GET /jobs``;
``POST /jobs`` ``{argv, title, cwd, env}``; ``GET /jobs/{id}``;
``POST /jobs/{id}/stop``; ``GET /jobs/{id}/log?offset=N`` (text, with the
next offset and the job's state in the ``X-Next-Offset``/``X-Job-State``
headers); ``GET /jobs/{id}/events?offset=N`` (the job's trial events,
``{events, next_offset, state}``: tuner.trials.event_codec).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import socket
import sys
import time
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tuner import __version__
from tuner.service import paths
from tuner.service.jobs import Job, JobTable
from tuner.trials.event_codec import read_lines

LOG_CHUNK = 1 << 20
DEFAULT_IDLE = 600.0


class Service:
    """The table, the time of the last request, and the HTTP handlers over them."""

    def __init__(self, table: JobTable, idle: float) -> None:
        self.table = table
        self.idle = idle
        self.last_request = time.monotonic()

    def _job(self, request: Request) -> Job | Response:
        job = self.table.find(request.path_params["job"])
        if job is None:
            return JSONResponse({"error": "no such job (or the prefix is ambiguous)"}, 404)
        return job

    async def health(self, request: Request) -> Response:
        return JSONResponse({"pid": os.getpid(), "version": __version__})

    async def list_jobs(self, request: Request) -> Response:
        self.table.pump()
        return JSONResponse([j.public() for j in self.table.jobs.values()])

    async def submit(self, request: Request) -> Response:
        body = await request.json()
        argv, env = body.get("argv"), body.get("env")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            return JSONResponse({"error": "argv must be a non-empty list of strings"}, 400)
        if not isinstance(env, dict):
            return JSONResponse({"error": "env must be an object"}, 400)
        cwd = str(body.get("cwd") or os.getcwd())
        if not Path(cwd).is_dir():
            return JSONResponse({"error": f"cwd {cwd} is not a directory"}, 400)
        title = str(body.get("title") or " ".join(argv))
        meta = body.get("meta") or {}
        if not isinstance(meta, dict):
            return JSONResponse({"error": "meta must be an object"}, 400)
        job = self.table.submit(
            argv,
            title,
            cwd,
            {str(k): str(v) for k, v in env.items()},
            {str(k): str(v) for k, v in meta.items()},
        )
        return JSONResponse(job.public(), 201)

    async def show(self, request: Request) -> Response:
        job = self._job(request)
        if not isinstance(job, Job):
            return job
        self.table.pump()
        return JSONResponse(job.public())

    async def stop(self, request: Request) -> Response:
        job = self._job(request)
        if not isinstance(job, Job):
            return job
        return JSONResponse(self.table.stop(job).public())

    async def log(self, request: Request) -> Response:
        job = self._job(request)
        if not isinstance(job, Job):
            return job
        self.table.pump()
        offset = int(request.query_params.get("offset", "0") or 0)
        try:
            with open(self.table.log_path(job), "rb") as log:
                log.seek(offset)
                chunk = log.read(LOG_CHUNK)
        except FileNotFoundError:
            chunk = b""
        headers = {"X-Next-Offset": str(offset + len(chunk)), "X-Job-State": str(job.state)}
        return PlainTextResponse(chunk.decode("utf-8", "replace"), headers=headers)

    async def events(self, request: Request) -> Response:
        """The job's trial events from ``offset``: whole lines only, with the next offset and
        the job's state read *before* the file, so a client that sees an ended state has
        every event once it reads on to the end."""
        job = self._job(request)
        if not isinstance(job, Job):
            return job
        self.table.pump()
        state = str(job.state)
        offset = int(request.query_params.get("offset", "0") or 0)
        rows, next_offset = read_lines(self.table.events_path(job), offset, LOG_CHUNK)
        return JSONResponse({"events": rows, "next_offset": next_offset, "state": state})

    def app(self) -> Starlette:
        async def touch(scope, receive, send):  # type: ignore[no-untyped-def]
            self.last_request = time.monotonic()
            await inner(scope, receive, send)

        inner = Starlette(
            routes=[
                Route("/health", self.health),
                Route("/jobs", self.list_jobs, methods=["GET"]),
                Route("/jobs", self.submit, methods=["POST"]),
                Route("/jobs/{job}", self.show),
                Route("/jobs/{job}/stop", self.stop, methods=["POST"]),
                Route("/jobs/{job}/log", self.log),
                Route("/jobs/{job}/events", self.events),
            ]
        )
        return touch  # type: ignore[return-value]

    async def housekeeping(self, server: uvicorn.Server) -> None:
        """Twice a second: settle and start jobs; end the service once idle."""
        while not server.should_exit:
            await asyncio.sleep(0.5)
            self.table.pump()
            quiet = time.monotonic() - self.last_request
            if not self.table.busy() and quiet > self.idle:
                server.should_exit = True


def serve(idle: float) -> int:
    """Runs until idle; 0 also when another service already holds the lock."""
    lock = open(paths.lock_path(), "a")  # noqa: SIM115 - held for the process's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0
    sock = paths.socket_path()
    sock.unlink(missing_ok=True)
    os.umask(0o077)
    # Bound here, not by uvicorn: its uds= path would chmod the socket to 0666.
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    os.chmod(sock, 0o600)
    service = Service(JobTable(paths.jobs_dir()), idle)
    config = uvicorn.Config(service.app(), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)

    async def main() -> None:
        keeper = asyncio.create_task(service.housekeeping(server))
        try:
            await server.serve(sockets=[listener])
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    try:
        asyncio.run(main())
    finally:
        sock.unlink(missing_ok=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--idle", type=float, default=float(os.environ.get("TUNELAB_SERVICE_IDLE", DEFAULT_IDLE))
    )
    args = parser.parse_args(argv)
    return serve(args.idle)


if __name__ == "__main__":
    sys.exit(main())
