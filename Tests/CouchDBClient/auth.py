"""Scenario `auth`: refused credentials end the sync with exit 4 and write nothing on either
side: a wrong password (in the URL and with --user/--password) and a CouchDB user who is not a
member of the database (403) (README.md)."""
from harness import SyncOptions, couch_url, plain_docs, update_seq
from checkpoint import local_docs


def run(report, couch, local, control):
    report.section("authentication refused")
    plain_docs(couch, "auth-src", 20, prefix="au")
    couch.put("/auth-target", expect=201)
    # Wrong passwords are tried for a user of their own: CouchDB 3.5 locks a user out for five
    # minutes after five failures from one address ([chttpd_auth_lockout]), and the harness's
    # admin must stay usable.
    for user in ("authuser", "outsider"):
        couch.put(f"/_users/org.couchdb.user:{user}", json={"name": user, "password": f"{user}-pass",
                                                           "roles": [], "type": "user"}, expect=(201, 409))
    for db in ("auth-src", "auth-target"):
        couch.put(f"/{db}/_security", json={"admins": {"names": [], "roles": []},
                                            "members": {"names": ["authuser"], "roles": ["_admin"]}}, expect=200)
    local.create("auth-pull")
    local.create("auth-push")
    plain_docs(local.server, "auth-push", 20, prefix="ap", create=False)
    cases = [
        ("pull, wrong password in the URL", "auth-pull", couch_url(couch, "auth-src", user="authuser", password="wrong-pass"), "pull", None),
        ("pull, wrong --password", "auth-pull", f"{couch.base}/auth-src", "pull",
         SyncOptions(user="authuser", password="wrong-pass", max_attempts=2, timeout=20)),
        ("push, wrong password in the URL", "auth-push", couch_url(couch, "auth-target", user="authuser", password="wrong-pass"), "push", None),
        ("both ways, a user who is not a member (403)", "auth-push",
         couch_url(couch, "auth-target", user="outsider", password="outsider-pass"), None, None),
    ]
    for name, db, url, direction, opts in cases:
        label = f"[auth {name}]"
        before = (local.count(db), update_seq(local.server, db), update_seq(couch, "auth-src"),
                  update_seq(couch, "auth-target"), len(local_docs(couch, "auth-src")), len(local_docs(couch, "auth-target")))
        r = local.sync(db, url, direction, opts or SyncOptions(max_attempts=2, timeout=20))
        after = (local.count(db), update_seq(local.server, db), update_seq(couch, "auth-src"),
                 update_seq(couch, "auth-target"), len(local_docs(couch, "auth-src")), len(local_docs(couch, "auth-target")))
        report.check(f"{label}: exits 4 (authentication refused)", r.rc == 4, r.describe())
        report.check(f"{label}: nothing written on either side (local count and seq, CouchDB seqs, _local docs)",
                     before == after, f"before {before}, after {after}")
