"""The web console (issue 35) in a real browser: headless Chromium, driven by Selenium 4 and Debian's
chromedriver, against a real `ferry serve` on 127.0.0.1 (port 0), its console at /_utils/.

The journey (an admin): the login form is all there is before logging in; log in; create a database
from the databases page; open it; write a new document in the JSON editor and save it; edit it
(revision 2); refuse invalid JSON without a request; refuse a stale edit (the document changed on
the server behind the page) with a message; see a document written on the server appear in the
list without a reload (the page follows `_changes`); filter with a Mango selector; delete the
document. Then a reader: no "New document", no Save or Delete, a read-only editor, and a write
forged from the page with the reader's cookie is 403 (so is a write with the cookie from another
origin). On every page: no console errors (except the forged requests' own 403s), every control
reachable by Tab and named in Chromium's accessibility tree (DevTools `Accessibility.getFullAXTree`),
nothing wider than a 390 px viewport. Last, first paint of the documents page of a database of
100,000 documents, read through the Performance API (`performance.mark` after the first page of
rows is in the DOM), must be under one second, and is reported.

Run by Tests/Browser/check: `python console.py FERRY_BINARY TMPDIR`. Ends with `N passed, N failed`.
"""
import http.client
import json
import os
import shutil
import signal
import sys
import time
import urllib.parse

from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import ferryd  # noqa: E402  (Tests/lib)
from cors import Browser  # noqa: E402  (the same headless Chromium set-up)

ADMIN, ADMIN_PASSWORD = "ada", "analytical-engine-1"
READER, READER_PASSWORD = "rita", "read-only-reader-1"
WAIT = 15                 # seconds a page gets to show what the test waits for
FIRST_PAINT_DOCS = 100_000
FIRST_PAINT_LIMIT_MS = 1000
NARROW = 390

tally = ferryd.Tally()
check = tally.check
T0 = time.monotonic()


def log(msg):
    ferryd.log(msg, since=T0)


class Console:
    """One browser on one daemon's console."""

    def __init__(self, browser, daemon, shots):
        self.d = browser.driver
        self.daemon = daemon
        self.base = daemon.url + "/_utils/"
        self.pages = []          # (label, console errors, unnamed controls, unreachable controls, overflow)
        self.shots = shots       # a screenshot of each audited page goes here

    def wait(self, what, cond):
        try:
            return WebDriverWait(self.d, WAIT, poll_frequency=0.05).until(lambda d: cond())
        except WebDriverException as e:
            raise ferryd.CheckFailed(f"waited {WAIT} s for {what}: {type(e).__name__}; status line: "
                                     f"{self.status()!r}; console: {self.console()}") from None

    def status(self):
        try:
            return self.d.find_element(By.ID, "status").text
        except WebDriverException:
            return None

    def console(self):
        return [e.get("message", "") for e in self.d.get_log("browser")]

    def go(self, fragment):
        self.d.get(self.base + fragment)

    def heading(self):
        return self.d.execute_script("const h = document.querySelector('main h1'); return h ? h.textContent : null")

    def button(self, name):
        for b in self.d.find_elements(By.CSS_SELECTOR, "main button, header button"):
            if b.text == name and b.is_displayed():
                return b
        return None

    def field(self, label):
        for lab in self.d.find_elements(By.CSS_SELECTOR, "main label"):
            if lab.text.split("\n")[0].startswith(label):
                return lab.find_element(By.CSS_SELECTOR, "input, textarea")
        raise ferryd.CheckFailed(f"no field labelled {label!r} on {self.heading()!r}")

    def set_text(self, label, text):
        el = self.field(label)
        # Through JS (a long JSON document typed key by key is slow), then an input event.
        self.d.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))", el, text)

    def login(self, name, password):
        self.go("")
        self.wait("the login form", lambda: self.heading() == "Log in")
        self.field("User name").send_keys(name)
        self.field("Password").send_keys(password + Keys.ENTER)
        self.wait("the databases page", lambda: self.heading() == "Databases")

    def logout(self):
        self.button("Log out").click()
        self.wait("the login form after logging out", lambda: self.heading() == "Log in")

    def audit(self, label, allowed_errors=()):
        """The page's console errors, controls without a name, controls Tab does not reach, and
        whether it is wider than a 390 px viewport; recorded and checked."""
        errors = [m for m in self.console() if "SEVERE" in m or "Uncaught" in m]
        errors = [m for m in errors if not any(a in m for a in allowed_errors)]
        named, unnamed = self.unnamed_controls()
        reached, unreachable = self.unreachable_controls()
        self.d.save_screenshot(os.path.join(self.shots, label.replace(" ", "-").replace("(", "").replace(")", "") + ".png"))
        self.d.set_window_size(NARROW, 900)
        width = self.wait("the narrow layout", lambda: self.d.execute_script(
            "return window.innerWidth <= 400 ? [document.documentElement.scrollWidth, window.innerWidth] : null"))
        self.d.set_window_size(1200, 900)
        self.pages.append((label, errors, unnamed, unreachable, width))
        log(f"{label}: {named} controls in the accessibility tree, {reached} reached by Tab, "
            f"{width[0]} px wide at {width[1]} px, {len(errors)} console errors")
        check(not errors, f"{label}: console errors: {errors}")
        check(not unnamed, f"{label}: controls without an accessible name: {unnamed}")
        check(not unreachable, f"{label}: controls Tab does not reach: {unreachable}")
        check(width[0] <= width[1], f"{label}: {width[0]} px wide in a {width[1]} px viewport")

    def unnamed_controls(self):
        tree = self.d.execute_cdp_cmd("Accessibility.getFullAXTree", {})["nodes"]
        roles = {"button", "link", "textbox", "searchbox", "checkbox", "combobox", "radio"}
        out, named = [], 0
        for n in tree:
            role = (n.get("role") or {}).get("value")
            if n.get("ignored") or role not in roles:
                continue
            name = ((n.get("name") or {}).get("value") or "").strip()
            if not name:
                out.append(role)
            named += 1
        return named, out

    def unreachable_controls(self):
        """Presses Tab through the page and lists the visible, enabled controls never focused."""
        controls = self.d.execute_script("""
            const all = [...document.querySelectorAll('a[href], button, input, textarea, select')];
            return all.filter(e => !e.disabled && e.offsetParent !== null);""")
        self.d.execute_script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)")
        body = self.d.find_element(By.TAG_NAME, "body")
        body.send_keys(Keys.TAB)
        reached = []
        for _ in range(len(controls) + 10):
            el = self.d.switch_to.active_element
            if el in reached:
                break
            reached.append(el)
            el.send_keys(Keys.TAB)
        return len(reached), [c.get_attribute("outerHTML")[:80] for c in controls if c not in reached]

    def forged_write(self, path, body):
        """A PUT sent from the page with its cookie (what a reader's edit control would send)."""
        return self.d.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch(arguments[0], {method: 'PUT', credentials: 'same-origin',
                                 headers: {'Content-Type': 'application/json'}, body: arguments[1]})
              .then(r => done(r.status), e => done(String(e)));""", path, json.dumps(body))

    def table_ids(self):
        return self.d.execute_script(
            "return [...document.querySelectorAll('main tbody td:first-child a')].map(a => a.textContent)")


def journey(c, daemon):
    d = daemon
    c.go("")
    c.wait("the login form", lambda: c.heading() == "Log in")
    check(c.d.find_elements(By.CSS_SELECTOR, "main table") == [], "before login: no table is shown")
    c.go("#/db/notes")
    c.wait("the login form for a deep link", lambda: c.heading() == "Log in")
    c.audit("login page")

    c.login(ADMIN, ADMIN_PASSWORD)
    c.audit("databases page (admin)")
    c.set_text("New database name", "journal")
    c.button("Create database").click()
    c.wait("journal in the databases table", lambda: "journal" in c.table_ids())
    check(d.request("GET", "/journal")[0] == 200, "the console created database journal")

    c.d.find_element(By.LINK_TEXT, "journal").click()
    c.wait("the documents page", lambda: c.heading() == "Documents in journal")
    c.d.find_element(By.LINK_TEXT, "New document").click()
    c.wait("the new document editor", lambda: c.heading() == "New document in journal")
    c.audit("new document page")
    c.set_text("New document", json.dumps({"_id": "first", "title": "Hello", "n": 1}))
    c.button("Save").click()
    c.wait("the saved message", lambda: (c.status() or "").startswith("Saved first"))
    doc = d.json("/journal/first")
    check(doc.get("title") == "Hello" and doc["_rev"].startswith("1-"), f"saved from the editor: {doc}")

    c.wait("the document page", lambda: c.heading() == "first")
    c.audit("document page (writer)")
    editor = c.field("Document first")
    edited = json.loads(editor.get_property("value"))
    edited["title"] = "Hello again"
    c.set_text("Document first", json.dumps(edited))
    c.button("Save").click()
    c.wait("the second save", lambda: "as revision 2-" in (c.status() or ""))
    check(d.json("/journal/first").get("title") == "Hello again", "the edit reached the server")

    before = d.json("/journal/first")
    c.set_text("Document first", '{"title": "broken", ')
    c.button("Save").click()
    c.wait("the invalid JSON message", lambda: "not valid JSON" in (c.status() or ""))
    check(d.json("/journal/first") == before, "invalid JSON: nothing was written")

    # The document changes on the server; the page still holds revision 2.
    behind = dict(before, title="changed elsewhere")
    d.ok("PUT", "/journal/first", behind)
    page = dict(before, title="my stale edit")
    c.set_text("Document first", json.dumps(page))
    c.button("Save").click()
    c.wait("the stale-revision message", lambda: "stale" in (c.status() or ""))
    check(d.json("/journal/first").get("title") == "changed elsewhere", "a stale edit is refused, the other change kept")
    c.audit("document page after refusals", allowed_errors=("409",))

    # Live list: documents written on the server appear without a reload.
    c.d.find_element(By.LINK_TEXT, "Documents in journal").click()
    c.wait("the documents page", lambda: c.heading() == "Documents in journal")
    c.audit("documents page (writer)")
    for i, kind in enumerate(["a", "b", "b", "a"]):
        d.ok("PUT", f"/journal/live-{i}", {"kind": kind})
    c.wait("the documents written on the server", lambda: "live-3" in c.table_ids())
    check(True, "documents written on the server appeared in the open list")
    c.set_text("Mango selector", '{"kind": "b"}')
    c.button("Filter").click()
    c.wait("the filtered list", lambda: c.table_ids() == ["live-1", "live-2"])
    check(True, "a Mango filter lists only the matching documents")
    c.set_text("Mango selector", '{"kind": ')
    c.button("Filter").click()
    c.wait("the selector error", lambda: "not valid JSON" in (c.status() or ""))

    c.go("#/db/journal/doc/first")
    c.wait("the document page", lambda: c.heading() == "first")
    c.button("Reload").click()
    c.wait("the reload", lambda: "Reloaded" in (c.status() or ""))
    c.button("Delete").click()
    c.d.switch_to.alert.accept()
    c.wait("the deletion", lambda: c.heading() == "Documents in journal")
    check(d.request("GET", "/journal/first")[0] == 404, "the console deleted the document")

    # A reader.
    d.ok("PUT", "/notes/memo", {"text": "read me"})
    c.logout()
    c.login(READER, READER_PASSWORD)
    c.wait("the reader's databases", lambda: "notes" in c.table_ids())
    check("journal" not in c.table_ids() and "notes" in c.table_ids(), f"a reader sees its databases only: {c.table_ids()}")
    check(c.button("Delete") is None and c.button("Compact") is None, "a reader has no database controls")
    check(not c.d.find_elements(By.CSS_SELECTOR, "main form"), "a reader cannot create databases")
    c.go("#/db/notes")
    c.wait("the documents page", lambda: c.heading() == "Documents in notes")
    check(not c.d.find_elements(By.LINK_TEXT, "New document"), "a reader has no New document link")
    c.go("#/db/notes/doc/memo")
    c.wait("the document page", lambda: c.heading() == "memo")
    check(c.button("Save") is None and c.button("Delete") is None, "a reader has no Save or Delete")
    check(c.field("Document memo").get_property("readOnly"), "a reader's editor is read-only")
    status = c.forged_write("/notes/memo", {"text": "forged", "_rev": d.json("/notes/memo")["_rev"]})
    check(status == 403, f"a write forged from the page with a reader's cookie: {status}")
    check(d.json("/notes/memo").get("text") == "read me", "the forged write changed nothing")
    c.audit("document page (reader)", allowed_errors=("403",))


def cross_origin(daemon):
    """A write with the admin's session cookie is 403 from another page's Origin, and goes
    through from the server's own (the console's) and without an Origin (not a browser)."""
    def send(method, path, body, headers):
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
        try:
            conn.request(method, path, body=json.dumps(body), headers={"Content-Type": "application/json", **headers})
            r = conn.getresponse()
            return r.status, r.getheader("Set-Cookie"), r.read()
        finally:
            conn.close()
    status, cookie, _ = send("POST", "/_session", {"name": ADMIN, "password": ADMIN_PASSWORD}, {})
    check(status == 200 and cookie, f"login for the cross-origin check: {status}")
    cookie = cookie.split(";", 1)[0]
    own = f"http://127.0.0.1:{daemon.port}"
    for origin, want in [("http://evil.example", 403), ("null", 403), (own, 201), (None, 201)]:
        headers = {"Cookie": cookie, **({"Origin": origin} if origin else {})}
        status, _, body = send("PUT", f"/notes/from-{urllib.parse.quote(origin or 'none', safe='')}", {"x": 1}, headers)
        check(status == want, f"a cookie write with Origin {origin}: {status} (want {want}) {body[:120]!r}")


def first_paint(c, daemon):
    d = daemon
    d.ok("PUT", "/big")
    batch = 5000
    for start in range(0, FIRST_PAINT_DOCS, batch):
        d.ok("POST", "/big/_bulk_docs", {"docs": [{"_id": f"doc-{i:06d}", "n": i, "text": "x" * 64}
                                                 for i in range(start, start + batch)]}, timeout=120)
    check(d.doc_count("big") == FIRST_PAINT_DOCS, f"big holds {FIRST_PAINT_DOCS} documents")
    c.login(ADMIN, ADMIN_PASSWORD)
    times = []
    for _ in range(3):
        c.go("#/db/big")
        c.d.refresh()     # a full load: the measure counts from navigation start
        c.wait("the first page of big", lambda: len(c.table_ids()) == 20)
        t = c.wait("the mark", lambda: c.d.execute_script(
            "const m = performance.getEntriesByName('ferry-documents-shown'); return m.length ? m[0].startTime : null"))
        times.append(t)
    best, worst = min(times), max(times)
    log(f"first paint of the documents page with {FIRST_PAINT_DOCS} documents: {', '.join(f'{t:.0f}' for t in times)} ms")
    print(f"console first paint ({FIRST_PAINT_DOCS} docs): median {sorted(times)[1]:.0f} ms (best {best:.0f}, worst {worst:.0f})")
    check(sorted(times)[1] < FIRST_PAINT_LIMIT_MS, f"first paint {sorted(times)[1]:.0f} ms < {FIRST_PAINT_LIMIT_MS} ms")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(f"usage: {sys.argv[0]} FERRY_BINARY TMPDIR")
    ferry, tmp = sys.argv[1], sys.argv[2]
    os.makedirs(tmp, exist_ok=True)
    browser = None
    shutil.rmtree(os.path.join(tmp, "console-data"), ignore_errors=True)
    daemon = ferryd.Daemon(ferry, os.path.join(tmp, "console-data"), name="console", port=0, log_dir=tmp,
                           flags=["--no-advertise", "--log-level", "info"],
                           users=[[ADMIN, "--password", ADMIN_PASSWORD, "--role", "*=admin"],
                                  [READER, "--password", READER_PASSWORD, "--role", "notes=reader"]],
                           dbs=["notes"], death_signal=signal.SIGKILL)
    try:
        daemon.start()
        browser = Browser(tmp)
        log(f"Chromium {browser.version}; console at {daemon.url}/_utils/")
        shots = os.path.join(tmp, "screenshots")
        os.makedirs(shots, exist_ok=True)
        c = Console(browser, daemon, shots)
        journey(c, daemon)
        cross_origin(daemon)
        c.logout()
        first_paint(c, daemon)
    except (ferryd.SetupError, ferryd.CheckFailed, WebDriverException) as e:
        check(False, f"{type(e).__name__}: {e}")
    finally:
        if browser:
            browser.quit()
        daemon.stop()
    print(tally.summary(), flush=True)
    sys.exit(tally.status())


if __name__ == "__main__":
    main()
