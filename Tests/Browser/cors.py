"""CORS in a real browser (issue 32): headless Chromium, driven by Selenium 4 and Debian's chromedriver,
loads a page from one origin (a static server on 127.0.0.1, port 0, in a thread) that talks to a daemon
on another (127.0.0.1, another port: another origin, the same site) with `fetch` and the `AuthSession`
cookie only (Tests/Browser/page/app.js: POST /_session with JSON, GET /_session, PUT a document — a
preflighted request —, GET it, PUT it again with its _rev, GET _all_docs, a GET without the cookie,
DELETE /_session, a GET after it).

Cases:
  ferry-cors      `ferry serve --cors-origin PAGE-ORIGIN --cors-credentials`: every step answers as it
                  should, the document is in Ferry (read back here with Basic auth), the page could not
                  see the cookie (HttpOnly) nor Set-Cookie, Chromium stored the cookie without blocking
                  it, sent it (and no Authorization header) with the PUT, and sent a preflight (OPTIONS)
                  before it — seen by Chromium (DevTools Network events, via chromedriver's performance
                  log), counted by Ferry (/_metrics) and in its access log (the PUT made as the user).
                  No 401 may carry WWW-Authenticate: Basic — Chromium answers one to a credentialed
                  fetch by waiting for a login (a dialog; headless, a fetch that never settles: the
                  page aborts a step after STEP_TIMEOUT s and records it); CouchDB 3.5 sends none.
  ferry-no-cors   `ferry serve` without CORS: every fetch fails (TypeError, not a hang), nothing is
                  written.
  ferry-other     CORS for another origin (http://localhost:PAGE-PORT): refused likewise.
  ferry-no-creds  CORS for the page's origin without --cors-credentials: the credentialed fetches are
                  refused, nothing is written; the one fetch without credentials gets its 401.
  couchdb-cors    the same page against Apache CouchDB 3.5 (../shared/tools/couchdb) with
                  [chttpd] enable_cors and [cors] origins/credentials: the same answers (skipped with a
                  notice when ../shared/tools/couchdb is absent).
  couchdb-other   CouchDB with CORS for another origin: refused.

Run by Tests/Browser/check: `python cors.py FERRY_BINARY TMPDIR` (CHROMIUM, CHROMEDRIVER and COUCHDB
override the programs' paths). Synchronises by polling with deadlines; ports are all 0 or free ones.
Writes each case's page record and DevTools events to TMPDIR/CASE.json. Ends with `N passed, N failed`.
"""
import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import ferryd  # noqa: E402  (Tests/lib)

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PAGE_DIR = os.path.join(HERE, "page")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
COUCH = os.environ.get("COUCHDB", os.path.join(ROOT, "..", "shared", "tools", "couchdb", "couchdb"))
STEP_TIMEOUT = 3            # seconds the page lets one fetch take before it aborts it
PAGE_DEADLINE = 9 * STEP_TIMEOUT + 10   # seconds for the page to finish its nine steps
USER, PASSWORD, DB = "alice", "wonderland-7", "notes"

tally = ferryd.Tally()
check = tally.check
T0 = time.monotonic()


def log(msg):
    ferryd.log(msg, since=T0)


# -- the page's origin ----------------------------------------------------------------------------

class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def static_server():
    """Serves Tests/Browser/page on 127.0.0.1, a free port, from a thread; (server, origin)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=PAGE_DIR))
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, name="static", daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


# -- the browser ----------------------------------------------------------------------------------

class Browser:
    """Headless Chromium through chromedriver, with DevTools Network events (performance log) and
    console messages (browser log) kept."""

    def __init__(self, tmp):
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for arg in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                    "--no-default-browser-check", "--disable-extensions", "--disable-background-networking"):
            opts.add_argument(arg)
        if os.geteuid() == 0:
            opts.add_argument("--no-sandbox")       # Chromium refuses to run as root with its sandbox
        opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        opts.add_experimental_option("perfLoggingPrefs", {"enableNetwork": True, "enablePage": False})
        service = Service(CHROMEDRIVER, log_output=os.path.join(tmp, "chromedriver.log"))
        self.driver = webdriver.Chrome(options=opts, service=service)
        self.driver.set_page_load_timeout(PAGE_DEADLINE)
        self.version = self.driver.capabilities.get("browserVersion")

    def run_page(self, url):
        """Loads the page with a clean cookie jar and waits for its record; (record, DevTools Network
        events, console messages)."""
        d = self.driver
        d.execute_cdp_cmd("Network.clearBrowserCookies", {})
        d.get_log("performance")            # drop what earlier pages logged
        d.get_log("browser")
        d.get(url)
        result = {}

        def done():
            result["r"] = d.execute_script("return window.ferryResult || null")
            return result["r"]
        try:
            ferryd.poll_until(f"the page at {url} to finish", PAGE_DEADLINE, done)
        except ferryd.CheckFailed as e:
            console = [m.get("message", "") for m in d.get_log("browser")]
            so_far = d.execute_script("return (window.ferrySteps || []).map(s => [s.step, s.status, s.error])")
            raise ferryd.CheckFailed(f"{e}; steps so far: {ferryd.short(so_far, 1500)}; console: {console[-5:]}") from None
        events = [json.loads(e["message"])["message"] for e in d.get_log("performance")]
        events = [e for e in events if e.get("method", "").startswith("Network.")]
        console = [e.get("message", "") for e in d.get_log("browser")]
        return result["r"], events, console

    def quit(self):
        try:
            self.driver.quit()
        except WebDriverException:
            pass


# -- what the page saw ----------------------------------------------------------------------------

def steps_of(record):
    return {s["step"]: s for s in record["steps"]}


def desc(step):
    if step is None:
        return "missing"
    if step.get("timedOut"):
        return f"no answer within {step['timedOut']} s (aborted: {step.get('error')})"
    return step.get("error") or f"{step.get('status')} {ferryd.short(step.get('body'), 200)}"


class Net:
    """DevTools Network events of one page load, by request."""

    def __init__(self, events):
        self.sent, self.sent_extra, self.received_extra = {}, {}, {}
        self.preflights = []
        for e in events:
            m, p = e["method"], e.get("params", {})
            rid = p.get("requestId")
            if m == "Network.requestWillBeSent":
                req = p.get("request", {})
                self.sent.setdefault(rid, []).append(p)
                if req.get("method") == "OPTIONS" or p.get("type") == "Preflight":
                    self.preflights.append(p)
            elif m == "Network.requestWillBeSentExtraInfo":
                self.sent_extra.setdefault(rid, []).append(p)
            elif m == "Network.responseReceivedExtraInfo":
                self.received_extra.setdefault(rid, []).append(p)

    def requests(self, method, url):
        """Request IDs of the non-preflight requests sent with this method to this URL."""
        return [rid for rid, ps in self.sent.items()
                if any(p["request"]["method"] == method and p["request"]["url"] == url for p in ps)]

    def preflights_for(self, url):
        return [p for p in self.preflights if p["request"]["url"] == url]

    def headers_sent(self, rid):
        """The headers Chromium really sent with request `rid` (lower-cased names), {} if unknown."""
        for p in self.sent_extra.get(rid, []):
            return {k.lower(): v for k, v in p.get("headers", {}).items()}
        return {}

    def blocked_cookies(self, rid):
        """Cookies Chromium refused to store from the answer to `rid`, with the reasons."""
        return [b for p in self.received_extra.get(rid, []) for b in p.get("blockedCookies", [])]

    def basic_challenges(self):
        """(method, URL, WWW-Authenticate) of the 401 answers Chromium got to requests (not preflights)
        that ask for credentials. (An answer Chromium holds while it waits for a login never shows
        up here.)"""
        found = []
        for rid, ps in self.received_extra.items():
            for p in ps:
                www = [v for k, v in p.get("headers", {}).items() if k.lower() == "www-authenticate"]
                if p.get("statusCode") == 401 and www:
                    req = self.sent.get(rid, [{}])[0].get("request", {})
                    if req.get("method") != "OPTIONS" and (req.get("method"), req.get("url"), www[0]) not in found:
                        found.append((req.get("method"), req.get("url"), www[0]))
        return found

    def set_cookie(self, rid):
        for p in self.received_extra.get(rid, []):
            for k, v in p.get("headers", {}).items():
                if k.lower() == "set-cookie":
                    return v
        return None


def page_url(origin, daemon, doc):
    q = urllib.parse.urlencode({"daemon": daemon, "db": DB, "doc": doc, "name": USER, "password": PASSWORD,
                                "timeout": STEP_TIMEOUT})
    return f"{origin}/index.html?{q}"


def save(tmp, label, record, events, console):
    with open(os.path.join(tmp, f"{label}.json"), "w") as f:
        json.dump({"record": record, "console": console, "events": events}, f, indent=1)


def expect_works(label, origin, daemon, doc, record, net, stored):
    """The checks of a daemon that lets the page in. `stored`: the document as read back outside the
    browser with Basic auth (status, body)."""
    s = steps_of(record)
    check(record["origin"] == origin, f"{label}: the page's origin is {record['origin']}, not {origin}")
    login = s.get("login")
    check(login and login.get("status") == 200 and login["body"].get("ok") is True,
          f"{label}: POST /_session from the page: {desc(login)}")
    check(login and login.get("setCookieVisible") is None,
          f"{label}: the page could read Set-Cookie: {login and login.get('setCookieVisible')!r}")
    sess = s.get("session")
    name = sess.get("body", {}).get("userCtx", {}).get("name") if sess and isinstance(sess.get("body"), dict) else None
    check(sess and sess.get("status") == 200 and name == USER,
          f"{label}: GET /_session with the cookie should name {USER}: {desc(sess)}")
    create = s.get("create")
    rev1 = create["body"].get("rev") if create and isinstance(create.get("body"), dict) else None
    check(create and create.get("status") == 201 and create["body"].get("ok") is True and str(rev1).startswith("1-"),
          f"{label}: PUT /{DB}/{doc} with the cookie: {desc(create)}")
    read = s.get("read")
    rb = read.get("body") if read else None
    check(read and read.get("status") == 200 and isinstance(rb, dict) and rb.get("_id") == doc
          and rb.get("_rev") == rev1 and rb.get("n") == 1 and rb.get("from") == origin,
          f"{label}: GET /{DB}/{doc} should give back what was written (rev {rev1}): {desc(read)}")
    check(read and read.get("etag") == f'"{rev1}"',
          f"{label}: the ETag the page can read (Access-Control-Expose-Headers) is {read and read.get('etag')!r}, want '\"{rev1}\"'")
    update = s.get("update")
    rev2 = update["body"].get("rev") if update and isinstance(update.get("body"), dict) else None
    check(update and update.get("status") == 201 and str(rev2).startswith("2-"),
          f"{label}: PUT /{DB}/{doc} with _rev {rev1}: {desc(update)}")
    alld = s.get("all_docs")
    rows = alld["body"].get("rows", []) if alld and isinstance(alld.get("body"), dict) else []
    check(alld and alld.get("status") == 200 and any(r.get("id") == doc and r.get("value", {}).get("rev") == rev2 for r in rows),
          f"{label}: GET /{DB}/_all_docs should list {doc} at {rev2}: {desc(alld)}")
    nc = s.get("no_cookie")
    check(nc and nc.get("status") == 401, f"{label}: GET without credentials should be 401: {desc(nc)}")
    out = s.get("logout")
    check(out and out.get("status") == 200, f"{label}: DELETE /_session: {desc(out)}")
    after = s.get("after_logout")
    challenge = ""
    if after and after.get("timedOut"):
        # What Chromium got and is sitting on (DevTools: the answer's status and headers).
        answers = [(p.get("statusCode"), {k: v for k, v in p.get("headers", {}).items() if k.lower() == "www-authenticate"})
                   for rid in net.requests("GET", f"{daemon}/{DB}/{doc}") for p in net.received_extra.get(rid, [])]
        challenge = f"; Chromium's answers to GET {DB}/{doc} (status, WWW-Authenticate): {answers}"
    check(after and after.get("status") == 401,
          f"{label}: GET after logging out should be 401: {desc(after)}{challenge}")
    check("AuthSession" not in record.get("documentCookie", ""),
          f"{label}: document.cookie shows the session cookie (not HttpOnly): {record.get('documentCookie')!r}")
    status, body = stored
    check(status == 200 and isinstance(body, dict) and body.get("n") == 2 and body.get("_rev") == rev2
          and body.get("from") == origin,
          f"{label}: the document as the daemon has it (Basic auth): {status} {ferryd.short(body, 300)}")

    # What Chromium did on the wire (DevTools events).
    doc_url = f"{daemon}/{DB}/{doc}"
    challenges = net.basic_challenges()
    check(not challenges,
          f"{label}: 401 answers to the page carry WWW-Authenticate: Basic, which Chromium answers, for a "
          f"credentialed fetch, by waiting for a login (a dialog; headless, a fetch that never settles): {challenges}")
    logins = net.requests("POST", f"{daemon}/_session")
    blocked = [b for rid in logins for b in net.blocked_cookies(rid)]
    check(logins and not blocked, f"{label}: Chromium blocked the login's cookie: {blocked} "
                                  f"(Set-Cookie: {[net.set_cookie(r) for r in logins]})")
    puts = net.requests("PUT", doc_url)
    sent = net.headers_sent(puts[0]) if puts else {}
    check(puts and "AuthSession=" in sent.get("cookie", ""),
          f"{label}: the PUT should carry the AuthSession cookie; headers sent: {sent}")
    check(puts and "authorization" not in sent, f"{label}: the PUT carried an Authorization header: {sent.get('authorization')}")
    pre = net.preflights_for(doc_url)
    check(pre and pre[0]["request"]["headers"].get("Access-Control-Request-Method") == "PUT",
          f"{label}: no preflight (OPTIONS, Access-Control-Request-Method: PUT) before the PUT of {doc_url}: "
          f"{[(p['request']['method'], p['request']['url']) for p in net.preflights]}")
    return rev2


def expect_refused(label, record, net, stored, console, omit_status=None, server_log=None):
    """The checks of a daemon that does not let the page in: no credentialed fetch gives the page an
    answer (each throws TypeError: Failed to fetch, as Chromium refuses it), nothing is stored.
    `omit_status`: what the fetch without credentials gets (None: it is refused too). `server_log`:
    what the daemon says it answered, [(method, target, status)], named when a fetch hangs."""
    s = steps_of(record)
    check(len(s) == 9, f"{label}: the page ran {len(s)} steps, not 9")
    pending = []
    for name, step in s.items():
        if name == "no_cookie" and omit_status is not None:
            check(step.get("status") == omit_status,
                  f"{label}: {step['method']} {step['path']} without credentials should be {omit_status}: {desc(step)}")
            continue
        check("status" not in step, f"{label}: {step['method']} {step['path']} should be refused, the page got {desc(step)}")
        if step.get("timedOut"):
            pending.append(f"{step['method']} {step['path']}")
        else:
            check(step.get("error", "").startswith("TypeError"),
                  f"{label}: {step['method']} {step['path']} should fail with TypeError: {desc(step)}")
    check(not pending, f"{label}: fetches left pending (aborted after {STEP_TIMEOUT} s) instead of refused: {pending}; "
                       f"401 answers asking for Basic credentials seen by Chromium: {net.basic_challenges()}"
                       + (f"; the daemon's answers: {server_log}" if server_log is not None else ""))
    status, body = stored
    check(status == 404, f"{label}: the document should not exist: {status} {ferryd.short(body, 200)}")
    check(any("CORS policy" in m for m in console),
          f"{label}: Chromium's console says nothing of the CORS policy: {console[:3]}")


# -- the daemons ----------------------------------------------------------------------------------

def ferry_daemon(ferry, tmp, label, flags):
    data = os.path.join(tmp, label)
    shutil.rmtree(data, ignore_errors=True)
    d = ferryd.Daemon(ferry, data, name=label, port=0, log_dir=tmp, flags=["--no-advertise", "--log-level", "info", *flags],
                      users=[[USER, "--password", PASSWORD, "--role", f"{DB}=writer"]], dbs=[DB],
                      death_signal=signal.SIGKILL)
    return d.start()


ACCESS = re.compile(r"ferry\.request: .*?\buser=(\S+) .*?\] ([A-Z]+) (\S+) (\d{3})$")


def access_log(d):
    """Ferry's access log (ferry.request lines at info): [(user, method, target, status)]."""
    try:
        with open(d.err_path, errors="replace") as f:
            return [m.groups() for m in map(ACCESS.search, f.read().splitlines()) if m]
    except OSError:
        return []


def options_204(d):
    """Preflights Ferry answered with 204, by its /_metrics."""
    status, text = d.request("GET", "/_metrics")
    if status != 200 or not isinstance(text, str):
        return None
    return sum(int(n) for n in re.findall(r'ferry_http_requests_total\{[^}]*method="OPTIONS",status="204"\} (\d+)', text))


def run_case(browser, tmp, label, origin, daemon_url, doc, read_back):
    """Runs the page against `daemon_url`; (record, Net, console, stored document)."""
    t = time.monotonic()
    record, events, console = browser.run_page(page_url(origin, daemon_url, doc))
    save(tmp, label, record, events, console)
    stored = read_back(doc)
    log(f"{label}: page done in {record.get('ms')} ms ({time.monotonic() - t:.1f} s with the load): "
        + ", ".join(f"{st['step']} {st.get('status', 'refused')}" for st in record["steps"]))
    return record, Net(events), console, stored


def ferry_cases(browser, ferry, tmp, origin, other_origin):
    # 1. CORS for the page's origin, with credentials: everything works.
    d = ferry_daemon(ferry, tmp, "ferry-cors", ["--cors-origin", origin, "--cors-credentials"])
    try:
        before = options_204(d)
        rec, net, console, stored = run_case(browser, tmp, "ferry-cors", origin, d.url, "from-the-browser",
                                             lambda doc: d.request("GET", f"/{DB}/{doc}", basic=(USER, PASSWORD)))
        expect_works("ferry-cors", origin, d.url, "from-the-browser", rec, net, stored)
        after = options_204(d)
        check(before is not None and after is not None and after > before,
              f"ferry-cors: Ferry counted no preflight answered 204 (/_metrics OPTIONS 204: {before} -> {after})")
        # Ferry's own account (access log): the preflight, and the writes made as alice by the cookie.
        target = f"/{DB}/from-the-browser"
        want = [("-", "OPTIONS", target, "204"), (USER, "PUT", target, "201")]
        try:
            ferryd.poll_until("the access log lines", 5, lambda: all(w in access_log(d) for w in want))
            check(True, "")
        except ferryd.CheckFailed:
            check(False, f"ferry-cors: Ferry's access log should show {want}: "
                         f"{[line for line in access_log(d) if line[2] == target]}")
        check(d.crashed() is None, f"ferry-cors: the daemon crashed: {d.crashed()}")
    finally:
        d.stop()

    # 2.-4. Refused: no CORS, CORS for another origin, CORS without credentials.
    for label, flags, omit in (("ferry-no-cors", [], None),
                               ("ferry-other", ["--cors-origin", other_origin, "--cors-credentials"], None),
                               ("ferry-no-creds", ["--cors-origin", origin], 401)):
        d = ferry_daemon(ferry, tmp, label, flags)
        try:
            rec, net, console, stored = run_case(browser, tmp, label, origin, d.url, "should-not-exist",
                                                 lambda doc: d.request("GET", f"/{DB}/{doc}", basic=(USER, PASSWORD)))
            log_lines = [(m, t, st) for _, m, t, st in access_log(d) if m == "GET"]
            expect_refused(label, rec, net, stored, console, omit_status=omit, server_log=log_lines)
            check(d.doc_count(DB) == 0, f"{label}: {DB} holds {d.doc_count(DB)} documents, want 0")
        finally:
            d.stop()


def couch_cases(browser, tmp, origin, other_origin):
    if not os.path.exists(COUCH):
        print(f"NOTICE: CouchDB cross-check skipped: {COUCH} is absent (../shared/tools/couchdb).", flush=True)
        return
    couch_dir = os.path.join(tmp, "couchdb")
    port = ferryd.free_port()
    try:
        out = subprocess.run([COUCH, "start", couch_dir, "--port", str(port)], capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        check(False, "couchdb: did not start within 120 s")
        return
    m = re.search(r"http://(\S+?):(\S+?)@", out.stdout)
    if out.returncode != 0 or not m:
        check(False, f"couchdb: start failed: {out.returncode} {out.stdout[-300:]} {out.stderr[-300:]}")
        return
    base, admin_auth = f"http://127.0.0.1:{port}", (m.group(1), m.group(2))

    def couch(method, path, body=None, auth=admin_auth):
        return ferryd.http_request("127.0.0.1", port, method, path, body, basic=auth, timeout=30)

    try:
        def put(path, body):
            status, answer = couch("PUT", path, body)
            if status not in (200, 201, 202):
                raise ferryd.SetupError(f"couchdb: PUT {path}: {status} {ferryd.short(answer)}")

        put(f"/_users/org.couchdb.user:{USER}", {"name": USER, "password": PASSWORD, "roles": [], "type": "user"})
        put(f"/{DB}", None)
        put(f"/{DB}/_security", {"admins": {"names": [], "roles": []}, "members": {"names": [USER], "roles": []}})
        put("/_node/_local/_config/chttpd/enable_cors", "true")
        put("/_node/_local/_config/cors/credentials", "true")
        log(f"couchdb: {base} (CouchDB {couch('GET', '/')[1].get('version')})")

        def read_back(doc):
            return couch("GET", f"/{DB}/{urllib.parse.quote(doc)}", auth=(USER, PASSWORD))

        put("/_node/_local/_config/cors/origins", origin)
        rec, net, console, stored = run_case(browser, tmp, "couchdb-cors", origin, base, "from-the-browser", read_back)
        expect_works("couchdb-cors", origin, base, "from-the-browser", rec, net, stored)

        put("/_node/_local/_config/cors/origins", other_origin)
        rec, net, console, stored = run_case(browser, tmp, "couchdb-other", origin, base, "should-not-exist", read_back)
        expect_refused("couchdb-other", rec, net, stored, console)
    finally:
        subprocess.run([COUCH, "stop", couch_dir, "--wipe"], capture_output=True, timeout=120)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(f"usage: {sys.argv[0]} FERRY_BINARY TMPDIR")
    ferry, tmp = sys.argv[1], sys.argv[2]
    os.makedirs(tmp, exist_ok=True)
    srv, origin = static_server()
    other_origin = "http://localhost:" + origin.rsplit(":", 1)[1]   # same port, another host: another origin
    browser = None
    try:
        browser = Browser(tmp)
        log(f"Chromium {browser.version}; the page at {origin}/index.html")
        ferry_cases(browser, ferry, tmp, origin, other_origin)
        couch_cases(browser, tmp, origin, other_origin)
    except (ferryd.SetupError, ferryd.CheckFailed, WebDriverException) as e:
        check(False, f"{type(e).__name__}: {e}")
    finally:
        if browser:
            browser.quit()
        srv.shutdown()
        srv.server_close()
    log(f"done (records and DevTools events in {tmp}/*.json)")
    print(tally.summary(), flush=True)
    sys.exit(tally.status())


if __name__ == "__main__":
    main()
