"""Schemathesis hooks for Tests/REST/contract (loaded through SCHEMATHESIS_HOOKS).

The changes feed's long forms are bounded so a generated request cannot hold a worker for
minutes: `continuous` is a stream of JSON lines (not one JSON document, so it cannot be checked
against a schema; Tests/REST/interop.py reads it with curl -N) and is sent as `longpoll`; a
longpoll or eventsource feed waits at most 200 ms and gets no heartbeat (with one, an idle
feed never ends, as CouchDB's does not).

Managed replications (/_replicator, /_replicate): the spec pins peer URLs to 127.0.0.1:9 (the
discard port: refused at once), but negative cases send strings outside that pattern, and a
stored replication keeps retrying its peer for the whole run; so a peer, source or target that
is a URL to anywhere else is sent as ws://127.0.0.1:9/x: the daemon never reaches out. A one-shot
POST /_replicate answers when the run is done, and one with `conditions` that never hold (the
peer reachable, an interface up) never starts, so it would hold the worker until the request
timeout (Protocol/replicator.md: conditions hold every start back): its `conditions` are dropped.
Everything else is sent as generated.
"""
from urllib.parse import urlsplit

import schemathesis

LONG_FEEDS = {"longpoll", "continuous", "eventsource"}


def _bound_feed(params):
    if not isinstance(params, dict):
        return
    feed = params.get("feed")
    if isinstance(feed, list):  # a repeated parameter: the server reads the last one
        feed = feed[-1] if feed else None
        params["feed"] = feed
    if not isinstance(feed, (str, type(None))):
        return
    if feed == "continuous":
        params["feed"] = feed = "longpoll"
    if feed in LONG_FEEDS or "feed" not in params:
        params.pop("heartbeat", None)
        params["timeout"] = 200


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    _bound_replication(case)
    if case.operation.path.endswith("/_changes"):
        if case.query is None:
            case.query = {}
        _bound_feed(case.query)
        # POST may carry the parameters in its body too.
        if isinstance(case.body, dict):
            _bound_feed(case.body)


LOCAL_PEER = "ws://127.0.0.1:9/x"


def _keep_peers_local(body):
    for key in ("peer", "source", "target"):
        value = body.get(key)
        if not isinstance(value, str):
            continue
        if not value.strip().lower().startswith(("ws:", "wss:", "http:", "https:")):
            continue  # a local database name (or not a URL: refused)
        try:
            local = urlsplit(value.strip()).netloc == "127.0.0.1:9"
        except ValueError:
            local = False
        if not local:
            body[key] = LOCAL_PEER


def _bound_replication(case):
    path = case.operation.path
    if not (path.startswith("/_replicator") or path == "/_replicate"):
        return
    if not isinstance(case.body, dict):
        return
    _keep_peers_local(case.body)
    if path == "/_replicate":
        case.body.pop("conditions", None)
