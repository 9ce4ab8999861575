"""Generated requests for the differential test: Schemathesis (docs/api/openapi.yaml, the version
Tests/REST/contract pins) makes requests for every operation CouchDB also has — positive and
negative data, derandomised so every run sends the same ones — and each goes to both servers;
their status classes (2xx/3xx/4xx/5xx) must agree. Case ids are `gen.METHOD /path#N` (N counts
the operation's examples), so rows of the deliberate-differences table can name them; the
aspect is `status-class couchdb Nxx ferry Mxx`.

`{db}` is always `gen`, a database made (with a document `doc-1`) on both servers before each
request if a previous one deleted it. Ferry-only operations (`/_replicator`, `/_scheduler`,
`/_discovery`, `/_metrics`) and `/_replicate` (shapes differ by design, and a generated peer
could be anywhere) are not sent. Answers that did not come (a timeout, a closed connection)
count as class `error`.
"""
import concurrent.futures
import json
import os
import warnings
from urllib.parse import urlencode

import requests

from differential import ADMIN, PASSWORD, match_row

EXAMPLES = int(os.environ.get("FERRY_DIFF_EXAMPLES", "4"))   # per operation and generation mode
SKIP_PREFIXES = ("/_replicator", "/_scheduler", "/_discovery", "/_metrics", "/_replicate")
GEN_DB = "gen"


def generate(spec):
    import hypothesis
    from hypothesis import HealthCheck, given, settings
    import schemathesis
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_path(spec)
    out = []
    for result in schema.get_all_operations():
        try:
            op = result.ok()
        except Exception:  # noqa: BLE001 — an operation the spec cannot generate for
            continue
        if op.path.startswith(SKIP_PREFIXES) or op.path == "/_up" and op.method.upper() != "GET":
            continue
        params = {"db": GEN_DB} if "{db}" in op.path else None
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            got = []
            try:
                strategy = op.as_strategy(generation_mode=mode, path_parameters=params)
            except Exception:  # noqa: BLE001
                continue

            @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck), phases=[hypothesis.Phase.generate])
            @given(strategy)
            def collect(case):
                got.append(case)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    collect()
            except Exception:  # noqa: BLE001 — unsatisfiable negative data and the like
                pass
            for c in got[:EXAMPLES]:
                out.append((f"{op.method.upper()} {op.path}", mode.value, c))
    return out


def klass(status):
    return f"{status // 100}xx" if status else "error"


def bounded(kw):
    """Long feeds would hold the run: a generated `_changes` is at most a short longpoll."""
    params = kw.get("params") or {}
    if "/_changes" in kw["url"] and isinstance(params, dict):
        if params.get("feed") in ("continuous", "eventsource", "longpoll"):
            params["feed"] = "longpoll"
        params.pop("heartbeat", None)
        params["timeout"] = 200
        kw["params"] = params
    return kw


def send(session, base, case):
    try:
        kw = case.as_transport_kwargs(base_url=base)
    except Exception as e:  # noqa: BLE001
        return None, f"could not build: {e}"
    kw = bounded(kw)
    kw.setdefault("headers", {})
    kw["headers"] = {k: v for k, v in kw["headers"].items() if k.lower() not in ("x-schemathesis-testcaseid",)}
    kw["headers"].setdefault("Authorization", requests.auth._basic_auth_str(ADMIN, PASSWORD))
    try:
        r = session.request(timeout=15, allow_redirects=False, **kw)
        return r.status_code, r.text[:160]
    except requests.RequestException as e:
        return 0, f"{type(e).__name__}"


def describe(case):
    """The request as sent (not Schemathesis' curl line, which masks values such as `keys`)."""
    try:
        kw = case.as_transport_kwargs(base_url="http://SERVER")
    except Exception as e:  # noqa: BLE001
        return f"{case.method} {case.formatted_path} ({e})"
    url = kw["url"]
    if kw.get("params"):
        url += "?" + urlencode(kw["params"], doseq=True)
    out = f"{kw['method']} {url}"
    ct = {k.lower(): v for k, v in (kw.get("headers") or {}).items()}.get("content-type")
    if "json" in kw:
        out += f" body {json.dumps(kw['json'], ensure_ascii=True)[:200]}"
    elif kw.get("data") is not None:
        out += f" body ({ct}) {str(kw['data'])[:200]!r}"
    return out


def reseed(session, base):
    session.put(f"{base}/{GEN_DB}?q=1", auth=(ADMIN, PASSWORD), timeout=15)
    session.put(f"{base}/{GEN_DB}/doc-1", json={"n": 1}, auth=(ADMIN, PASSWORD), timeout=15)


def run(couch_runner, ferry_runner, rows, tmp):
    """Sends the generated requests to both; returns (count, [(line, allowed row or None)])."""
    spec = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs", "api", "openapi.yaml")
    cwd = os.getcwd()
    os.chdir(tmp)           # Hypothesis may write .hypothesis/ in the working directory
    try:
        cases = generate(spec)
    finally:
        os.chdir(cwd)
    bases = (couch_runner.base, ferry_runner.base)
    sessions = (requests.Session(), requests.Session())
    diffs, counts = [], {}
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        for label, mode, case in cases:
            counts[label] = counts.get(label, 0) + 1
            cid = f"gen.{label}#{counts[label]}"
            list(ex.map(reseed, sessions, bases))
            (sc, tc), (sf, tf) = ex.map(send, sessions, bases, (case, case))
            if sc is None or sf is None:
                continue
            if klass(sc) != klass(sf):
                aspect = f"status-class couchdb {klass(sc)} ferry {klass(sf)}"
                line = (f"{cid} [{mode}] {aspect}: couchdb {sc} {tc[:80]!r} | ferry {sf} {tf[:80]!r} "
                        f"— {describe(case)}")
                diffs.append((line, match_row(rows, cid, aspect)))
    return len(cases), diffs
