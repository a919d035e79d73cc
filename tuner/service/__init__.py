"""The per-user study service: work that outlives the terminal that started it (issue 18).

tunelab runs over SSH; a dropped connection must not end a multi-hour study.
``tunelab jobs start -- ab ...`` hands the command to a small service process
(started on demand, one per user, ending itself when idle) that runs it as a
*job*: a detached ``tunelab`` process in its own session whose output goes to
a log file, not to a terminal. The job keeps every guarantee a foreground
command has (its engines, their reapers, the store's recovery); the service
queues jobs so two studies never share the GPUs, remembers them in a table
that survives a restart of the service, and serves that table and the logs to
any client over a Unix socket (mode 0600) in the user's runtime directory.

The protocol is plain HTTP over the Unix socket: uvicorn and Starlette serve
it, the standard library's ``http.client`` speaks it; nothing here invents a
wire format. Only the user reaches it: the socket's directory is proven
private (:mod:`tuner.service.paths`) and both ends check the other's user id
on the connected socket (:mod:`tuner.service.peer`); docs/reliability.md
states the whole threat model.
"""
