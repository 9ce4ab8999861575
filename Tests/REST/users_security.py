"""`_users` and `_security` on a real `ferry serve` (issue 32): a reader added through them can
pull but not push, over BLIP (`ferry sync`) and over REST; a member can do both; the password
written in a `_users` document never appears in clear in any answer, log line or file of the
data directory; `_security` changes take effect on a running daemon.

Run by Tests/REST/interop: `python users_security.py FERRY_BINARY TMPDIR`. Ends with
`N passed, N failed`.
"""
import os
import subprocess
import sys

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ferryd  # noqa: E402  (Tests/lib)

FERRY, TMP = sys.argv[1], sys.argv[2]
SECRET = "rita-Secret-9d2f"   # the reader's password: must never be seen in clear
MEMBER_SECRET = "mona-Secret-41c7"
t = ferryd.Tally()


def sync(url, db, direction):
    p = subprocess.run([FERRY, "sync", url, "--db", db, direction], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def main():
    data = os.path.join(TMP, "users-security")
    os.makedirs(data, exist_ok=True)
    d = ferryd.serve(FERRY, data, TMP, "users-security", users=[["admin", "--role", "*=admin", "--password", "admin-pw"]])
    seen = []  # every answer body, searched for the passwords at the end
    admin = httpx.Client(base_url=d.url, auth=("admin", "admin-pw"), timeout=60)

    def call(client, method, path, **kw):
        r = client.request(method, path, **kw)
        seen.append(r.text + "".join(f"{k}: {v}\n" for k, v in r.headers.items()))
        return r

    call(admin, "PUT", "/shared")
    call(admin, "PUT", "/shared/doc1", json={"v": 1})
    # Users through _users, with CouchDB roles.
    r = call(admin, "PUT", "/_users/org.couchdb.user:rita",
             json={"name": "rita", "password": SECRET, "roles": ["auditors"], "type": "user"})
    t.check(r.status_code == 201 and r.json().get("rev", "").startswith("1-"), f"rita created: {r.status_code} {r.text}")
    r = call(admin, "PUT", "/_users/org.couchdb.user:mona",
             json={"name": "mona", "password": MEMBER_SECRET, "roles": ["editors"], "type": "user"})
    t.check(r.status_code == 201, f"mona created: {r.status_code}")
    doc = call(admin, "GET", "/_users/org.couchdb.user:rita").json()
    t.check(doc.get("password_scheme") == "pbkdf2" and "derived_key" in doc and "password" not in doc,
            f"the _users document shows the hash, not the password: {sorted(doc)}")
    rita = httpx.Client(base_url=d.url, auth=("rita", SECRET), timeout=60)
    mona = httpx.Client(base_url=d.url, auth=("mona", MEMBER_SECRET), timeout=60)

    # Before _security grants anything: CouchDB 3's admin-only default.
    t.check(call(rita, "GET", "/shared/doc1").status_code == 403, "no access before _security grants it")
    sec = call(admin, "GET", "/shared/_security").json()
    t.check(sec == {"members": {"roles": ["_admin"]}, "admins": {"roles": ["_admin"]}}, f"the default security object: {sec}")
    r = call(admin, "PUT", "/shared/_security", json={"readers": {"roles": ["auditors"]}, "members": {"roles": ["editors"]}})
    t.check(r.status_code == 200, f"_security set: {r.status_code} {r.text}")
    t.check(call(rita, "PUT", "/shared/_security", json={}).status_code == 403, "a reader may not change _security")
    t.check(call(admin, "PUT", "/shared/_security", json={"members": {"names": "x"}}).status_code == 400, "a malformed object is refused")

    # REST: the reader reads and may not write; the member does both.
    t.check(call(rita, "GET", "/shared/doc1").status_code == 200, "the reader reads over REST")
    t.check(call(rita, "GET", "/shared/_changes").status_code == 200, "the reader reads _changes")
    t.check(call(rita, "PUT", "/shared/doc2", json={}).status_code == 403, "the reader may not write over REST")
    t.check(call(rita, "POST", "/shared/_bulk_docs", json={"docs": [{"_id": "doc3"}]}).status_code == 403, "nor with _bulk_docs")
    t.check(call(mona, "PUT", "/shared/mona1", json={"by": "mona"}).status_code == 201, "the member writes over REST")

    # BLIP: ferry sync as the reader pulls, and its push is refused; the member pushes.
    port = d.url.rsplit(":", 1)[1]
    local = os.path.join(TMP, "rita-local.ferry")
    code, out = sync(f"ws://rita:{SECRET}@127.0.0.1:{port}/shared", local, "--pull")
    t.check(code == 0 and "2 pulled" in out, f"the reader pulls over BLIP: {code} {out[-300:]}")
    subprocess.run([FERRY, "put", "--db", local, "from-rita", '{"x":1}'], capture_output=True, check=True)
    code, out = sync(f"ws://rita:{SECRET}@127.0.0.1:{port}/shared", local, "--push")
    t.check("may only pull" in out and "1 pushed" not in out, f"the reader's BLIP push is refused: {code} {out[-300:]}")
    t.check(call(admin, "GET", "/shared/from-rita").status_code == 404, "nothing the reader pushed arrived")
    member_local = os.path.join(TMP, "mona-local.ferry")
    subprocess.run([FERRY, "put", "--db", member_local, "from-mona", '{"x":2}'], capture_output=True, check=True)
    code, out = sync(f"ws://mona:{MEMBER_SECRET}@127.0.0.1:{port}/shared", member_local, "--push")
    t.check(code == 0 and call(admin, "GET", "/shared/from-mona").status_code == 200, f"the member pushes over BLIP: {out[-200:]}")

    # Taking the grant away takes effect at once.
    call(admin, "PUT", "/shared/_security", json={"members": {"roles": ["editors"]}})
    t.check(call(rita, "GET", "/shared/doc1").status_code == 403, "a reader removed from _security is refused at once")
    # A password change through _users: the old one stops working.
    doc = call(admin, "GET", "/_users/org.couchdb.user:rita").json()
    doc["password"] = SECRET + "-2"
    t.check(call(admin, "PUT", "/_users/org.couchdb.user:rita", json=doc).status_code == 201, "password changed")
    t.check(call(rita, "GET", "/_session").status_code == 401, "the old password no longer works")
    r = call(admin, "PUT", "/_users/org.couchdb.user:rita", json=doc)
    t.check(r.status_code == 409, f"a stale _rev is a conflict: {r.status_code}")
    t.check(call(rita, "GET", "/_users/org.couchdb.user:rita").status_code in (401, 403), "_users is for server admins")

    d.stop()
    # The passwords never appear in clear: answers, the daemon's logs, any file of the data dir.
    for what, secret in (("reader", SECRET), ("member", MEMBER_SECRET)):
        t.check(not any(secret in s for s in seen), f"the {what}'s password is in no answer")
        logs = "".join(open(p, errors="replace").read() for p in (d.err_path, d.out_path) if os.path.exists(p))
        t.check(secret not in logs, f"the {what}'s password is in no log line")
        hits = []
        for root, _, files in os.walk(data):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    if secret.encode() in fh.read():
                        hits.append(f)
        t.check(not hits, f"the {what}'s password is in no file of the data directory: {hits}")
    print(t.summary())
    return t.status()


if __name__ == "__main__":
    sys.exit(main())
