"""Schemathesis hooks for Tests/REST/contract (loaded through SCHEMATHESIS_HOOKS).

The changes feed's long forms are bounded so a generated request cannot hold a worker for
minutes: `continuous` is a stream of JSON lines (not one JSON document, so it cannot be checked
against a schema; Tests/REST/interop.py reads it with curl -N) and is sent as `longpoll`; a
longpoll or eventsource feed waits at most 200 ms and gets no heartbeat (with one, an idle
feed never ends, as CouchDB's does not). Everything else is sent as generated.
"""
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
    if case.operation.path.endswith("/_changes"):
        if case.query is None:
            case.query = {}
        _bound_feed(case.query)
        # POST may carry the parameters in its body too.
        if isinstance(case.body, dict):
            _bound_feed(case.body)
