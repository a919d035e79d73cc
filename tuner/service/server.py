"""The service process: the job table behind an HTTP API on a private Unix socket.

Run as ``python -m tuner.service.server`` (clients start it on demand, in
its own session, so a terminal hang-up does not reach it). One per user: a
second copy finds the lock taken and exits at once. It ends itself after
``--idle`` seconds with no job queued or running and no request, and removes
its socket. The socket is created under umask 077 (mode 0600) in a directory
:func:`tuner.service.paths.runtime_dir` proved private (0700, this user's, no
symlink), and every connection whose peer is another user is dropped before
a byte of it is read (:mod:`tuner.service.peer`): only the user can submit work.

API (JSON unless said otherwise): ``GET /health``; ``GET /jobs``;
``POST /jobs`` ``{argv, title, cwd, env, meta}``; ``GET /jobs/{id}``;
``POST /jobs/{id}/stop``; ``GET /jobs/{id}/log?offset=N`` (text, with the
next offset and the job's state in the ``X-Next-Offset``/``X-Job-State``
headers); ``GET /jobs/{id}/events?offset=N`` (the job's trial events,
``{events, next_offset, state}``: tuner.trials.event_codec).

A request the service cannot use gets a 4xx answer ``{"error": "..."}`` that
says what is wrong, never a 500: a body over :data:`MAX_BODY` (413, counted
while reading, whatever Content-Length claims), bytes that are not JSON or
nest too deeply (:func:`tuner.bounded.loads`), fields of the wrong type or
size (:mod:`tuner.service.requests`), an offset that is not a whole number.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import socket
import sys
import time
import traceback
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from tuner import __version__
from tuner.errors import TunelabError
from tuner.service import paths, peer
from tuner.service.jobs import Job, JobTable
from tuner.service.requests import MAX_BODY, BadRequest, parse_offset, parse_submission
from tuner.trials.event_codec import read_lines

LOG_CHUNK = 1 << 20
DEFAULT_IDLE = 600.0


class Json(JSONResponse):
    """JSON with non-ASCII escaped: a stored string that is not valid UTF-8 (a lone
    surrogate from a job's argv) is still a valid answer, not an encoding error."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class PeerCheckedProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """uvicorn's HTTP protocol, dropping a connection whose peer is another user at once.

    The socket's 0600 mode and private directory already keep other users out;
    this is the second wall (root could still hand a connection over, or a mode
    could be changed), checked on the connected socket itself.
    """

    refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is None or not peer.is_own(sock):
            self.refused = True
            print("[tunelab service] dropped a connection from another user", flush=True)
            transport.abort()
            return
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.refused:
            super().data_received(data)

    def eof_received(self) -> None:
        if not self.refused:
            super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.refused:
            super().connection_lost(exc)


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request's body, refused (413) once more than ``limit`` bytes have arrived.

    Content-Length is used to refuse early, never to decide how much to read: a
    body is counted as it streams in, so a lying or missing length changes nothing.
    """
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise BadRequest(f"the request body is larger than {limit} bytes", 413)
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise BadRequest(f"the request body is larger than {limit} bytes", 413)
        chunks.append(chunk)
    return b"".join(chunks)


class Service:
    """The table, the time of the last request, and the HTTP handlers over them."""

    def __init__(self, table: JobTable, idle: float) -> None:
        self.table = table
        self.idle = idle
        self.last_request = time.monotonic()

    def _job(self, request: Request) -> Job:
        job = self.table.find(request.path_params["job"])
        if job is None:
            raise BadRequest("no such job (or the prefix is ambiguous)", 404)
        return job

    async def health(self, request: Request) -> Response:
        return Json({"pid": os.getpid(), "version": __version__})

    async def list_jobs(self, request: Request) -> Response:
        self.table.pump()
        return Json([j.public() for j in self.table.jobs.values()])

    async def submit(self, request: Request) -> Response:
        sub = parse_submission(await read_body(request))
        job = self.table.submit(sub.argv, sub.title, sub.cwd, sub.env, sub.meta)
        return Json(job.public(), 201)

    async def show(self, request: Request) -> Response:
        job = self._job(request)
        self.table.pump()
        return Json(job.public())

    async def stop(self, request: Request) -> Response:
        return Json(self.table.stop(self._job(request)).public())

    async def log(self, request: Request) -> Response:
        job = self._job(request)
        offset = parse_offset(request.query_params.get("offset"))
        self.table.pump()
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
        offset = parse_offset(request.query_params.get("offset"))
        self.table.pump()
        state = str(job.state)
        rows, next_offset = read_lines(self.table.events_path(job), offset, LOG_CHUNK)
        return Json({"events": rows, "next_offset": next_offset, "state": state})

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
            ],
            exception_handlers={BadRequest: _refused, HTTPException: _http_error},
        )
        return touch  # type: ignore[return-value]

    async def housekeeping(self, server: uvicorn.Server) -> None:
        """Twice a second: settle and start jobs; end the service once idle."""
        while not server.should_exit:
            await asyncio.sleep(0.5)
            try:
                self.table.pump()
            except Exception:  # a bug: said in the log, and the service goes on serving
                traceback.print_exc()
            quiet = time.monotonic() - self.last_request
            if not self.table.busy() and quiet > self.idle:
                server.should_exit = True


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BadRequest)
    return Json({"error": exc.message}, exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 as JSON, like every other refusal."""
    assert isinstance(exc, HTTPException)
    return Json({"error": exc.detail}, exc.status_code, headers=exc.headers)


def serve(idle: float) -> int:
    """Runs until idle; 0 also when another service already holds the lock."""
    os.umask(0o077)
    lock = os.fdopen(paths.open_private(paths.lock_path(), os.O_WRONLY | os.O_APPEND), "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0
    sock = paths.socket_path()
    sock.unlink(missing_ok=True)
    # Bound here, not by uvicorn: its uds= path would chmod the socket to 0666.
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    os.chmod(sock, 0o600)
    service = Service(JobTable(paths.jobs_dir()), idle)
    config = uvicorn.Config(
        service.app(), log_level="warning", lifespan="off", http=PeerCheckedProtocol
    )
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
    try:
        return serve(args.idle)
    except TunelabError as exc:  # an unsafe directory: said once, in the service's log
        fix = f" ({exc.fix})" if exc.fix else ""
        print(f"[tunelab service] {exc.message}{fix}", file=sys.stderr, flush=True)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
