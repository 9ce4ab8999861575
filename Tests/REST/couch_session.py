"""`/_session` against the real thing: the same requests go to Apache CouchDB 3.5 (../shared/tools/
couchdb) and to `ferry serve`, and their status codes, JSON bodies and `Set-Cookie` attributes must
agree — form and JSON logins, wrong and missing passwords, a wrong Content-Type, GET as anonymous,
with Basic, with the cookie, with a malformed and with a forged cookie, DELETE, `?next=`, 405 —
and the cookie's format (base64url of NAME:HEX-TIMESTAMP:32-byte HMAC) and its renewal once a
tenth of the timeout has passed (both servers run with a 10 s timeout).

Then CouchDB's own replicator, given `http://user:password@…` URLs, replicates a database from
Ferry to CouchDB and back (`POST /_replicate`); it logs in with `POST /_session` first (Ferry's
metrics count those logins), which Ferry used to refuse with 405 (`replication_auth_error`).

Run by Tests/REST/interop: `python couch_session.py FERRY_BINARY TMPDIR`. Prints SKIPPED and
exits 77 where ../shared/tools/couchdb is absent. Ends with `N passed, N failed`.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferryd  # noqa: E402  (Tests/lib)

FERRY, TMP = sys.argv[1], sys.argv[2]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COUCH = os.path.join(ROOT, "..", "shared", "tools", "couchdb", "couchdb")
TIMEOUT = 10
tally = ferryd.Tally()
check, ok, free_port = tally.check, ferryd.ok, ferryd.free_port




def cookie_attributes(header):
    """`Set-Cookie` as (value, {attribute: value}) with Expires left out (it names the time)."""
    if header is None:
        return None
    parts = [p.strip() for p in header.split(";")]
    name, _, value = parts[0].partition("=")
    attrs = {}
    for p in parts[1:]:
        k, _, v = p.partition("=")
        if k.lower() != "expires":
            attrs[k.lower()] = v
        else:
            attrs["expires"] = bool(re.fullmatch(r"\w{3}, \d\d-\w{3}-\d{4} \d\d:\d\d:\d\d GMT", v))
    return name, value, attrs


def decode_cookie(value):
    raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    user, ts, mac = raw.split(b":", 2)
    return user.decode(), ts.decode(), mac


def body(r):
    try:
        return r.json()
    except ValueError:
        return r.text


class Pair:
    """The same request to CouchDB and to Ferry."""

    def __init__(self, couch, ferry):
        self.c, self.f = couch, ferry

    def send(self, method, path, **kw):
        return (self.c.request(method, path, **kw), self.f.request(method, path, **kw))

    def same(self, what, method, path, cookie_value=True, **kw):
        rc, rf = self.send(method, path, **kw)
        check(rc.status_code == rf.status_code, f"{what}: status CouchDB {rc.status_code}, Ferry {rf.status_code}")
        bc, bf = body(rc), body(rf)
        check(bc == bf, f"{what}: body CouchDB {bc!r}, Ferry {bf!r}")
        sc, sf = cookie_attributes(rc.headers.get("set-cookie")), cookie_attributes(rf.headers.get("set-cookie"))
        if sc is None or sf is None:
            check(sc == sf, f"{what}: Set-Cookie CouchDB {sc}, Ferry {sf}")
        else:
            check(sc[0] == sf[0] and sc[2] == sf[2], f"{what}: Set-Cookie attributes CouchDB {sc}, Ferry {sf}")
            check((sc[1] == "") == (sf[1] == ""), f"{what}: Set-Cookie value empty CouchDB {sc[1]!r}, Ferry {sf[1]!r}")
        loc_c, loc_f = rc.headers.get("location"), rf.headers.get("location")
        check((loc_c is None) == (loc_f is None), f"{what}: Location CouchDB {loc_c}, Ferry {loc_f}")
        if loc_c and loc_f:
            check(loc_c.split("/", 3)[3:] == loc_f.split("/", 3)[3:], f"{what}: Location path CouchDB {loc_c}, Ferry {loc_f}")
        return rc, rf


def login_cookie(client):
    r = client.post("/_session", data={"name": "bob", "password": "pw"})
    return cookie_attributes(r.headers["set-cookie"])[1]


def wait_renewal(client, cookie, deadline):
    """Asks with `cookie` until an answer renews it; the seconds that took, or None."""
    start = time.monotonic()
    while time.monotonic() < deadline:
        r = client.get("/_session", headers={"Cookie": f"AuthSession={cookie}"})
        if "set-cookie" in r.headers:
            return time.monotonic() - start, cookie_attributes(r.headers["set-cookie"])
        time.sleep(0.1)
    return None


def logins(ferry_base):
    """Successful `POST /_session` answers Ferry has counted."""
    text = httpx.get(f"{ferry_base}/_metrics", auth=("adm", "adm-pw")).text
    m = re.search(r'ferry_http_requests_total\{route="server",method="POST",status="200"\} (\d+)', text)
    return int(m.group(1)) if m else 0


def main():
    if not os.path.exists(COUCH):
        print("SKIPPED: ../shared/tools/couchdb is absent (the real CouchDB these checks compare against).")
        sys.exit(77)
    couch_dir = os.path.join(TMP, "session-couch")
    port = free_port()
    out = subprocess.run([COUCH, "start", couch_dir, "--port", str(port)], capture_output=True, text=True, check=True).stdout
    couch_base = f"http://127.0.0.1:{port}"
    couch_admin = re.search(r"http://\S+", out).group(0).rstrip("/")
    ferry = None
    try:
        admin = httpx.Client(base_url=couch_admin, timeout=60)
        ok = admin.put("/_users/org.couchdb.user:bob", json={"name": "bob", "password": "pw", "roles": [], "type": "user"})
        check(ok.status_code in (201, 202), f"CouchDB user bob: {ok.status_code} {ok.text}")
        admin.put("/_node/_local/_config/chttpd_auth/timeout", content=json.dumps(str(TIMEOUT)))
        # Ferry's default SameSite=Lax (--cookie-same-site), as CouchDB sends it so configured.
        admin.put("/_node/_local/_config/chttpd_auth/same_site", content=json.dumps("lax"))
        shutil.rmtree(os.path.join(TMP, "session-ferry"), ignore_errors=True)  # a fresh daemon each run
        ferry = ferryd.serve(
            FERRY, os.path.join(TMP, "session-ferry"), TMP, "session-ferry",
            users=[["bob", "--password", "pw", "--role", "*=writer"], ["adm", "--password", "adm-pw", "--role", "*=admin"]],
            args=["--session-timeout", str(TIMEOUT)])
        ferry_base = ferry.url
        pair = Pair(httpx.Client(base_url=couch_base, timeout=30), httpx.Client(base_url=ferry_base, timeout=30))

        # The same requests, the same answers.
        pair.same("form login", "POST", "/_session", data={"name": "bob", "password": "pw"})
        pair.same("JSON login", "POST", "/_session", json={"name": "bob", "password": "pw"})
        pair.same("wrong password", "POST", "/_session", data={"name": "bob", "password": "nope"})
        pair.same("unknown user", "POST", "/_session", data={"name": "nobody", "password": "pw"})
        pair.same("no password", "POST", "/_session", json={"name": "bob"})
        pair.same("text body", "POST", "/_session", content=b"x", headers={"Content-Type": "text/plain"})
        pair.same("anonymous GET", "GET", "/_session")
        pair.same("Basic GET", "GET", "/_session", auth=("bob", "pw"))
        pair.same("wrong Basic GET", "GET", "/_session", auth=("bob", "nope"))
        pair.same("DELETE", "DELETE", "/_session")
        pair.same("PUT", "PUT", "/_session", content=b"{}")
        pair.same("next=", "POST", "/_session?next=/bob", data={"name": "bob", "password": "pw"})
        pair.same("malformed cookie", "GET", "/_session", headers={"Cookie": "AuthSession=Ym9i"})
        pair.same("empty cookie", "GET", "/_session", headers={"Cookie": "AuthSession="})
        forged = base64.urlsafe_b64encode(b"bob:" + format(int(time.time()), "X").encode() + b":" + bytes(32)).decode().rstrip("=")
        pair.same("forged cookie", "GET", "/_session", headers={"Cookie": f"AuthSession={forged}"})

        # The cookie: same format, and it logs in on both.
        cc, cf = login_cookie(pair.c), login_cookie(pair.f)
        (uc, tc, mc), (uf, tf, mf) = decode_cookie(cc), decode_cookie(cf)
        check(uc == uf == "bob", f"cookie user: CouchDB {uc}, Ferry {uf}")
        check(re.fullmatch(r"[0-9A-F]+", tc) and re.fullmatch(r"[0-9A-F]+", tf), f"cookie timestamps hex: {tc}, {tf}")
        check(abs(int(tc, 16) - int(tf, 16)) <= 5, f"cookie timestamps agree: {tc}, {tf}")
        check(len(mc) == len(mf) == 32, f"cookie MAC lengths: {len(mc)}, {len(mf)}")
        rc = pair.c.get("/_session", headers={"Cookie": f"AuthSession={cc}"})
        rf = pair.f.get("/_session", headers={"Cookie": f"AuthSession={cf}"})
        check(rc.status_code == rf.status_code == 200 and rc.json() == rf.json(), f"cookie GET: {rc.text} / {rf.text}")
        check(rf.json()["info"].get("authenticated") == "cookie", f"Ferry authenticated by cookie: {rf.text}")
        rf = pair.f.get("/_all_dbs", headers={"Cookie": f"AuthSession={cf}"})
        check(rf.status_code == 200, f"Ferry accepts the cookie on other routes: {rf.status_code} {rf.text}")

        # Renewal: neither renews at once; both do once more than a tenth of the timeout passed.
        rc = pair.c.get("/_session", headers={"Cookie": f"AuthSession={cc}"})
        check("set-cookie" not in rc.headers, "CouchDB does not renew a fresh cookie")
        rf = pair.f.get("/_session", headers={"Cookie": f"AuthSession={cf}"})
        check("set-cookie" not in rf.headers, "Ferry does not renew a fresh cookie")
        deadline = time.monotonic() + TIMEOUT / 2
        nc, nf = wait_renewal(pair.c, cc, deadline), wait_renewal(pair.f, cf, deadline)
        check(nc is not None and nf is not None, f"both renew: CouchDB {nc}, Ferry {nf}")
        if nc and nf:
            check(nc[1][0] == nf[1][0] and nc[1][2] == nf[1][2], f"renewal attributes: {nc[1]} / {nf[1]}")
            check(decode_cookie(nf[1][1])[1] != tf, "Ferry's renewed cookie has a new timestamp")

        # CouchDB's replicator logs in to Ferry with POST /_session, both ways.
        creds = f"bob:pw@127.0.0.1:{ferry_base.rsplit(':', 1)[1]}"
        check(httpx.put(f"{ferry_base}/fsrc", auth=("adm", "adm-pw")).status_code == 201, "Ferry database fsrc")
        for i in range(20):
            httpx.put(f"{ferry_base}/fsrc/doc-{i}", json={"n": i}, auth=("bob", "pw"))
        before = logins(ferry_base)
        r = admin.post("/_replicate", json={"source": f"http://{creds}/fsrc", "target": f"{couch_admin}/csink", "create_target": True})
        check(r.status_code == 200 and r.json().get("ok") is True, f"Ferry → CouchDB: {r.status_code} {r.text[:300]}")
        check(admin.get("/csink").json().get("doc_count") == 20, f"CouchDB holds 20: {admin.get('/csink').text[:200]}")
        for i in range(5):
            admin.put(f"/csink/extra-{i}", json={"extra": i})
        check(httpx.put(f"{ferry_base}/fsink", auth=("adm", "adm-pw")).status_code == 201, "Ferry database fsink")
        r = admin.post("/_replicate", json={"source": f"{couch_admin}/csink", "target": f"http://{creds}/fsink"})
        check(r.status_code == 200 and r.json().get("ok") is True, f"CouchDB → Ferry: {r.status_code} {r.text[:300]}")
        count = httpx.get(f"{ferry_base}/fsink", auth=("bob", "pw")).json().get("doc_count")
        check(count == 25, f"Ferry holds 25: {count}")
        check(logins(ferry_base) - before >= 2, f"CouchDB's replicator logged in with POST /_session ({logins(ferry_base) - before} logins)")
    finally:
        if ferry:
            ferry.stop()
        subprocess.run([COUCH, "stop", couch_dir, "--wipe"], capture_output=True)
        shutil.rmtree(couch_dir, ignore_errors=True)
    print(tally.summary())
    sys.exit(tally.status())


main()
