"""The cases of the differential test (differential.py): each is an id and a list of steps, sent
in order to CouchDB and to Ferry, every answer compared. One case is one line where it can be:

    case("docs.get.revs", PUT("/{db}/a", {"n": 1}), GET("/{db}/a?revs=true"))

Every case gets a fresh database `{db}` (and `{db2}` with dbs=2), made with `?q=1` before its
steps and deleted after them. `{rev:ID}` is the current revision the server answered for ID,
`{rev:ID@N}` the one of generation N; `{seq}` the last sequence it answered (take it from
`GET /{db}` or a `_changes` step first); `{url}` its base URL with the admin's credentials.
See differential.Step for the options (auth, ctype, gzip, headers, stream, until, during,
ignore).
"""
import json
from urllib.parse import quote

from differential import COPY, DELETE, GET, HEAD, HEARTBEAT, POST, PUT, REQ, Case

CASES = []


def case(cid, *steps, dbs=1):
    CASES.append(Case(cid, steps, dbs))


def q(v):
    """A JSON query parameter value, URL-encoded."""
    return quote(json.dumps(v), safe="{}:@")     # {rev:ID@N} stays a template


def docs(*ids, **extra):
    """`_bulk_docs` writing documents `ids` with `n` = their index."""
    return POST("/{db}/_bulk_docs", {"docs": [{"_id": i, "n": k, **extra} for k, i in enumerate(ids)]})


ABC = docs("a", "b", "c", "d", "e")
H1, H2, H3 = "1-" + "a" * 32, "1-" + "b" * 32, "2-" + "c" * 32
CONFLICT = POST("/{db}/_bulk_docs", {"new_edits": False, "docs": [
    {"_id": "x", "_rev": H1, "v": "one"},
    {"_id": "x", "_rev": H2, "v": "two"},
]})
HISTORY = POST("/{db}/_bulk_docs", {"new_edits": False, "docs": [
    {"_id": "h", "_rev": H3, "v": 2, "_revisions": {"start": 2, "ids": ["c" * 32, "a" * 32]}},
]})
NOAUTH = {"auth": None}
ATT = PUT("/{db}/a/hello.txt", b"hello", ctype="text/plain")
ATT_BIN = PUT("/{db}/b/blob.bin", bytes(range(256)) * 4, ctype="application/octet-stream")
INLINE = PUT("/{db}/i", {"n": 1, "_attachments": {
    "note.txt": {"content_type": "text/plain", "data": "aGVsbG8gd29ybGQ="},
    "raw.bin": {"content_type": "application/octet-stream", "data": "AAECAwQ="}}})

# -- server -----------------------------------------------------------------------------------------
case("server.root", GET("/"))
case("server.root.noauth", GET("/", **NOAUTH))
case("server.root.head", HEAD("/"))
case("server.root.post", POST("/", {}))
case("server.root.delete", DELETE("/"))
case("server.up", GET("/_up"))
case("server.up.noauth", GET("/_up", **NOAUTH))
case("server.all_dbs", GET("/_all_dbs"))
case("server.all_dbs.noauth", GET("/_all_dbs", **NOAUTH))
case("server.all_dbs.limit", GET("/_all_dbs?limit=1"))
case("server.all_dbs.skip", GET("/_all_dbs?skip=1"))
case("server.all_dbs.descending", GET("/_all_dbs?descending=true"))
case("server.all_dbs.startkey", GET("/_all_dbs?startkey=%22d%22"))
case("server.all_dbs.endkey", GET("/_all_dbs?endkey=%22_users%22"))
case("server.all_dbs.post", POST("/_all_dbs", {}))
case("server.all_dbs.extra", GET("/_all_dbs/x"))
case("server.dbs_info.get", GET("/_dbs_info"))
case("server.dbs_info.post", POST("/_dbs_info", {"keys": ["{db}", "nosuchdb"]}))
case("server.dbs_info.post.empty", POST("/_dbs_info", {"keys": []}))
case("server.dbs_info.post.nokeys", POST("/_dbs_info", {}))
case("server.uuids", GET("/_uuids"))
case("server.uuids.count", GET("/_uuids?count=3"))
case("server.uuids.count0", GET("/_uuids?count=0"))
case("server.uuids.bad", GET("/_uuids?count=abc"))
case("server.uuids.toomany", GET("/_uuids?count=1001"))
case("server.uuids.noauth", GET("/_uuids", **NOAUTH))
case("server.uuids.post", POST("/_uuids", {}))
case("server.uuids.extra", GET("/_uuids/x"))
case("server.active_tasks", GET("/_active_tasks"))
case("server.active_tasks.noauth", GET("/_active_tasks", **NOAUTH))
case("server.scheduler.jobs", GET("/_scheduler/jobs"))
case("server.scheduler.docs", GET("/_scheduler/docs"))
case("server.scheduler.job.missing", GET("/_scheduler/jobs/nosuchjob"))
case("server.unknown", GET("/_nosuch"))
case("server.unknown.noauth", GET("/_nosuch", **NOAUTH))
case("server.wrong_password", GET("/_all_dbs", auth=("nobody", "wrong")))
case("server.wrong_password.root", GET("/", auth=("nobody", "wrong")))
case("server.node", GET("/_node/_local"))
case("server.membership", GET("/_membership"))
case("server.favicon", GET("/favicon.ico"))
case("server.utils", GET("/_utils/"))
case("server.cors.preflight", REQ("OPTIONS", "/{db}", headers={"Origin": "http://example.com",
                                                                 "Access-Control-Request-Method": "GET"}))

# -- databases ----------------------------------------------------------------------------------------
case("db.get", GET("/{db}"))
case("db.get.after_writes", ABC, DELETE("/{db}/a?rev={rev:a}"), GET("/{db}"))
case("db.head", HEAD("/{db}"))
case("db.head.missing", HEAD("/nosuchdb"))
case("db.get.missing", GET("/nosuchdb"))
case("db.get.noauth", GET("/{db}", **NOAUTH))
case("db.put.exists", PUT("/{db}"))
case("db.put.new", PUT("/{db}-new?q=1"), GET("/{db}-new"), DELETE("/{db}-new"))
case("db.put.bad_name.upper", PUT("/BadName"))
case("db.put.bad_name.digit", PUT("/1db"))
case("db.put.bad_name.underscore", PUT("/_nosuchsystem"))
case("db.put.bad_name.chars", PUT("/db%21x"))
case("db.put.with_slash", PUT("/{db}%2Fsub?q=1"), GET("/{db}%2Fsub"), DELETE("/{db}%2Fsub"))
case("db.put.noauth", PUT("/{db}-na", **NOAUTH))
case("db.put.body", PUT("/{db}-b?q=1", {"x": 1}), DELETE("/{db}-b"))
case("db.delete", PUT("/{db}-del?q=1"), DELETE("/{db}-del"), GET("/{db}-del"))
case("db.delete.missing", DELETE("/nosuchdb"))
case("db.delete.rev", DELETE("/{db}?rev=1-abc"), PUT("/{db}?q=1"))
case("db.delete.noauth", DELETE("/{db}", **NOAUTH))
case("db.post", POST("/{db}", {"n": 1}))
case("db.post.with_id", POST("/{db}", {"_id": "given", "n": 1}), GET("/{db}/given"))
case("db.post.existing_id", PUT("/{db}/given", {"n": 1}), POST("/{db}", {"_id": "given", "n": 2}))
case("db.post.batch", POST("/{db}?batch=ok", {"_id": "bb", "n": 1}))
case("db.post.not_object", POST("/{db}", [1, 2]))
case("db.post.bad_json", POST("/{db}", "{bad", ctype="application/json"))
case("db.post.text_plain", POST("/{db}", '{"n":1}', ctype="text/plain"))
case("db.post.form", POST("/{db}", "n=1", ctype="application/x-www-form-urlencoded"))
case("db.post.no_ctype", POST("/{db}", b'{"n":1}'))
case("db.post.gzip", POST("/{db}", {"_id": "gz", "n": 1}, gzip=True), GET("/{db}/gz"))
case("db.post.gzip.unknown", POST("/{db}", {"_id": "gz", "n": 1}, gzip="br"))
case("db.post.deflate", POST("/{db}", {"_id": "gz", "n": 1}, gzip="deflate"))
case("db.post.underscore_id", POST("/{db}", {"_id": "_bad", "n": 1}))
case("db.post.missing_db", POST("/nosuchdb", {"n": 1}))
case("db.patch", REQ("PATCH", "/{db}", {}))

# -- documents -------------------------------------------------------------------------------------------
case("doc.put", PUT("/{db}/a", {"n": 1}))
case("doc.put.get", PUT("/{db}/a", {"n": 1, "s": "x", "l": [1, {"k": None}]}), GET("/{db}/a"))
case("doc.put.update", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"_rev": "{rev:a}", "n": 2}), GET("/{db}/a"))
case("doc.put.conflict", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"n": 2}))
case("doc.put.stale", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"_rev": "{rev:a}", "n": 2}),
     PUT("/{db}/a", {"_rev": "{rev:a@1}", "n": 3}))
case("doc.put.rev_query", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a?rev={rev:a}", {"n": 2}))
case("doc.put.if_match", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"n": 2}, headers={"If-Match": '"{rev:a}"'}))
case("doc.put.rev_mismatch", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a?rev={rev:a}", {"_rev": "1-abc", "n": 2}))
case("doc.put.bad_rev", PUT("/{db}/a", {"_rev": "bogus", "n": 1}))
case("doc.put.unknown_rev", PUT("/{db}/a", {"_rev": "1-" + "f" * 32, "n": 1}))
case("doc.put.bad_json", PUT("/{db}/a", "{bad", ctype="application/json"))
case("doc.put.array", PUT("/{db}/a", [1, 2]))
case("doc.put.string", PUT("/{db}/a", '"s"', ctype="application/json"))
case("doc.put.empty_body", PUT("/{db}/a", b"", ctype="application/json"))
case("doc.put.text_plain", PUT("/{db}/a", '{"n":1}', ctype="text/plain"))
case("doc.put.gzip", PUT("/{db}/a", {"n": 1}, gzip=True), GET("/{db}/a"))
case("doc.put.gzip.unknown", PUT("/{db}/a", {"n": 1}, gzip="compress"))
case("doc.put.reserved_member", PUT("/{db}/a", {"_foo": 1}))
case("doc.put.underscore_id", PUT("/{db}/_foo", {"n": 1}))
case("doc.put.unicode_id", PUT("/{db}/%C3%A9t%C3%A9", {"n": 1}), GET("/{db}/%C3%A9t%C3%A9"))
case("doc.put.space_id", PUT("/{db}/a%20b", {"n": 1}), GET("/{db}/a%20b"))
case("doc.put.slash_id", PUT("/{db}/a%2Fb", {"n": 1}), GET("/{db}/a%2Fb"))
case("doc.put.deleted_flag", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"_rev": "{rev:a}", "_deleted": True}),
     GET("/{db}/a"))
case("doc.put.after_delete", PUT("/{db}/a", {"n": 1}), DELETE("/{db}/a?rev={rev:a}"), PUT("/{db}/a", {"n": 2}),
     GET("/{db}/a?revs=true"))
case("doc.put.batch", PUT("/{db}/a?batch=ok", {"n": 1}))
case("doc.put.noauth", PUT("/{db}/a", {"n": 1}, **NOAUTH))
case("doc.put.missing_db", PUT("/nosuchdb/a", {"n": 1}))
case("doc.put.new_edits_false", PUT("/{db}/a?new_edits=false", {"_rev": H1, "n": 1}), GET("/{db}/a"))
case("doc.put.new_edits_false.norev", PUT("/{db}/a?new_edits=false", {"n": 1}))
case("doc.put.id_mismatch", PUT("/{db}/a", {"_id": "b", "n": 1}))
case("doc.put.big_number", PUT("/{db}/a", {"n": 12345678901234567890, "f": 1.5e300}), GET("/{db}/a"))
case("doc.get.missing", GET("/{db}/nosuch"))
case("doc.get.missing_db", GET("/nosuchdb/a"))
case("doc.get.deleted", PUT("/{db}/a", {"n": 1}), DELETE("/{db}/a?rev={rev:a}"), GET("/{db}/a"))
case("doc.get.deleted.rev", PUT("/{db}/a", {"n": 1}), DELETE("/{db}/a?rev={rev:a}"), GET("/{db}/a?rev={rev:a}"))
case("doc.get.noauth", PUT("/{db}/a", {"n": 1}), GET("/{db}/a", **NOAUTH))
case("doc.get.rev.current", PUT("/{db}/a", {"n": 1}), GET("/{db}/a?rev={rev:a}"))
case("doc.get.rev.old", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"_rev": "{rev:a}", "n": 2}),
     GET("/{db}/a?rev={rev:a@1}"))
case("doc.get.rev.unknown", PUT("/{db}/a", {"n": 1}), GET("/{db}/a?rev=1-" + "f" * 32))
case("doc.get.rev.bad", PUT("/{db}/a", {"n": 1}), GET("/{db}/a?rev=bogus"))
case("doc.get.revs", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"_rev": "{rev:a}", "n": 2}), GET("/{db}/a?revs=true"))
case("doc.get.revs.given", HISTORY, GET("/{db}/h?revs=true"))
case("doc.get.revs_info", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"_rev": "{rev:a}", "n": 2}),
     GET("/{db}/a?revs_info=true"))
case("doc.get.revs_info.given", HISTORY, GET("/{db}/h?revs_info=true"))
case("doc.get.conflicts", CONFLICT, GET("/{db}/x?conflicts=true"))
case("doc.get.conflicts.none", PUT("/{db}/a", {"n": 1}), GET("/{db}/a?conflicts=true"))
case("doc.get.winner", CONFLICT, GET("/{db}/x"))
case("doc.get.deleted_conflicts", CONFLICT, DELETE("/{db}/x?rev=" + H1), GET("/{db}/x?deleted_conflicts=true"))
case("doc.get.deleted_conflicts.delete_winner", CONFLICT, DELETE("/{db}/x?rev=" + H2),
     GET("/{db}/x?deleted_conflicts=true&conflicts=true"))
case("doc.get.open_revs.all", CONFLICT, GET("/{db}/x?open_revs=all"))
case("doc.get.open_revs.list", CONFLICT, GET("/{db}/x?open_revs=" + q([H1, "1-" + "f" * 32])))
case("doc.get.open_revs.revs", HISTORY, GET("/{db}/h?open_revs=all&revs=true"))
case("doc.get.open_revs.latest", HISTORY, GET("/{db}/h?open_revs=" + q(["1-" + "a" * 32]) + "&latest=true"))
case("doc.get.open_revs.bad", CONFLICT, GET("/{db}/x?open_revs=notjson"))
case("doc.get.open_revs.multipart", CONFLICT, GET("/{db}/x?open_revs=all", accept="multipart/mixed"))
case("doc.get.open_revs.missing_doc", GET("/{db}/nosuch?open_revs=all"))
case("doc.get.latest", HISTORY, GET("/{db}/h?rev=" + H1 + "&latest=true"))
case("doc.get.local_seq", ABC, GET("/{db}/c?local_seq=true"))
case("doc.get.meta", CONFLICT, GET("/{db}/x?meta=true"))
case("doc.get.if_none_match", PUT("/{db}/a", {"n": 1}), GET("/{db}/a", headers={"If-None-Match": '"{rev:a}"'}))
case("doc.get.if_none_match.other", PUT("/{db}/a", {"n": 1}), GET("/{db}/a", headers={"If-None-Match": '"1-zzz"'}))
case("doc.get.bad_param", PUT("/{db}/a", {"n": 1}), GET("/{db}/a?revs=maybe"))
case("doc.head", PUT("/{db}/a", {"n": 1}), HEAD("/{db}/a"))
case("doc.head.missing", HEAD("/{db}/nosuch"))
case("doc.head.if_none_match", PUT("/{db}/a", {"n": 1}), HEAD("/{db}/a", headers={"If-None-Match": '"{rev:a}"'}))
case("doc.delete", PUT("/{db}/a", {"n": 1}), DELETE("/{db}/a?rev={rev:a}"))
case("doc.delete.if_match", PUT("/{db}/a", {"n": 1}), DELETE("/{db}/a", headers={"If-Match": '"{rev:a}"'}))
case("doc.delete.norev", PUT("/{db}/a", {"n": 1}), DELETE("/{db}/a"))
case("doc.delete.stale", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"_rev": "{rev:a}", "n": 2}),
     DELETE("/{db}/a?rev={rev:a@1}"))
case("doc.delete.missing", DELETE("/{db}/nosuch?rev=1-abc"))
case("doc.delete.twice", PUT("/{db}/a", {"n": 1}), DELETE("/{db}/a?rev={rev:a}"), DELETE("/{db}/a?rev={rev:a}"))
case("doc.delete.batch", PUT("/{db}/a", {"n": 1}), DELETE("/{db}/a?rev={rev:a}&batch=ok"))
case("doc.copy", PUT("/{db}/a", {"n": 1}), COPY("/{db}/a", headers={"Destination": "b"}), GET("/{db}/b"))
case("doc.copy.rev", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"_rev": "{rev:a}", "n": 2}),
     COPY("/{db}/a?rev={rev:a@1}", headers={"Destination": "b"}), GET("/{db}/b"))
case("doc.copy.overwrite", PUT("/{db}/a", {"n": 1}), PUT("/{db}/b", {"n": 9}),
     COPY("/{db}/a", headers={"Destination": "b?rev={rev:b}"}), GET("/{db}/b"))
case("doc.copy.conflict", PUT("/{db}/a", {"n": 1}), PUT("/{db}/b", {"n": 9}), COPY("/{db}/a", headers={"Destination": "b"}))
case("doc.copy.no_destination", PUT("/{db}/a", {"n": 1}), COPY("/{db}/a"))
case("doc.copy.missing", COPY("/{db}/nosuch", headers={"Destination": "b"}))
case("doc.copy.with_attachment", PUT("/{db}/a/hello.txt", b"hello", ctype="text/plain"),
     COPY("/{db}/a", headers={"Destination": "b"}), GET("/{db}/b"))
case("doc.copy.underscore_dest", PUT("/{db}/a", {"n": 1}), COPY("/{db}/a", headers={"Destination": "_x"}))
case("doc.extra_segment.missing_att", PUT("/{db}/a", {"n": 1}), GET("/{db}/a/nosuch.txt"))
case("doc.method.post", PUT("/{db}/a", {"n": 1}), POST("/{db}/a", {"n": 2}))
case("doc.method.patch", PUT("/{db}/a", {"n": 1}), REQ("PATCH", "/{db}/a", {"n": 2}))

# -- _bulk_docs ---------------------------------------------------------------------------------------------
case("bulk_docs.new", docs("a", "b"))
case("bulk_docs.no_ids", POST("/{db}/_bulk_docs", {"docs": [{"n": 1}, {"n": 2}]}))
case("bulk_docs.update", docs("a", "b"), POST("/{db}/_bulk_docs", {"docs": [{"_id": "a", "_rev": "{rev:a}", "n": 5},
                                                                           {"_id": "b", "n": 6}]}))
case("bulk_docs.fake_rev", POST("/{db}/_bulk_docs", {"docs": [{"_id": "a", "_rev": "1-abc", "n": 1}, {"_id": "b"}]}))
case("bulk_docs.fake_rev.existing", docs("a"), POST("/{db}/_bulk_docs", {"docs": [{"_id": "a", "_rev": "1-abc", "n": 1}]}))
case("bulk_docs.delete", docs("a", "b"),
     POST("/{db}/_bulk_docs", {"docs": [{"_id": "a", "_rev": "{rev:a}", "_deleted": True}]}), GET("/{db}/a"))
case("bulk_docs.delete.norev", docs("a"), POST("/{db}/_bulk_docs", {"docs": [{"_id": "a", "_deleted": True}]}))
case("bulk_docs.same_id_twice", POST("/{db}/_bulk_docs", {"docs": [{"_id": "a", "n": 1}, {"_id": "a", "n": 2}]}))
case("bulk_docs.new_edits_false", POST("/{db}/_bulk_docs", {"new_edits": False, "docs": [{"_id": "a", "_rev": H1, "n": 1}]}),
     GET("/{db}/a?revs=true"))
case("bulk_docs.new_edits_false.history", HISTORY, GET("/{db}/h?revs=true&revs_info=true"))
case("bulk_docs.new_edits_false.conflict", CONFLICT, GET("/{db}/x?conflicts=true"))
case("bulk_docs.new_edits_false.norev", POST("/{db}/_bulk_docs", {"new_edits": False, "docs": [{"_id": "a", "n": 1}]}))
case("bulk_docs.new_edits_false.deleted", POST("/{db}/_bulk_docs", {"new_edits": False, "docs": [
    {"_id": "a", "_rev": H1, "_deleted": True}]}), GET("/{db}/a"), GET("/{db}/a?rev=" + H1))
case("bulk_docs.new_edits_false.again", CONFLICT, CONFLICT, GET("/{db}/x?conflicts=true"))
case("bulk_docs.bad_body.not_object", POST("/{db}/_bulk_docs", [1]))
case("bulk_docs.bad_body.no_docs", POST("/{db}/_bulk_docs", {}))
case("bulk_docs.bad_body.docs_not_list", POST("/{db}/_bulk_docs", {"docs": {}}))
case("bulk_docs.bad_body.doc_not_object", POST("/{db}/_bulk_docs", {"docs": [1]}))
case("bulk_docs.bad_body.json", POST("/{db}/_bulk_docs", "{bad", ctype="application/json"))
case("bulk_docs.bad_body.new_edits", POST("/{db}/_bulk_docs", {"docs": [], "new_edits": "no"}))
case("bulk_docs.empty", POST("/{db}/_bulk_docs", {"docs": []}))
case("bulk_docs.underscore_id", POST("/{db}/_bulk_docs", {"docs": [{"_id": "ok"}, {"_id": "_bad"}]}), GET("/{db}/ok"))
case("bulk_docs.reserved_member", POST("/{db}/_bulk_docs", {"docs": [{"_id": "a", "_foo": 1}]}))
case("bulk_docs.text_plain", POST("/{db}/_bulk_docs", '{"docs":[]}', ctype="text/plain"))
case("bulk_docs.gzip", POST("/{db}/_bulk_docs", {"docs": [{"_id": "a"}]}, gzip=True), GET("/{db}/a"))
case("bulk_docs.gzip.unknown", POST("/{db}/_bulk_docs", {"docs": [{"_id": "a"}]}, gzip="br"))
case("bulk_docs.extra_segment", POST("/{db}/_bulk_docs/x", {"docs": []}))
case("bulk_docs.get", GET("/{db}/_bulk_docs"))
case("bulk_docs.missing_db", POST("/nosuchdb/_bulk_docs", {"docs": []}))
case("bulk_docs.noauth", POST("/{db}/_bulk_docs", {"docs": []}, **NOAUTH))
case("bulk_docs.design", POST("/{db}/_bulk_docs", {"docs": [{"_id": "_design/d", "views": {}}]}), GET("/{db}/_design/d"))
case("bulk_docs.local", POST("/{db}/_bulk_docs", {"docs": [{"_id": "_local/l", "n": 1}]}), GET("/{db}/_local/l"))
case("bulk_docs.attachment_inline", POST("/{db}/_bulk_docs", {"docs": [{"_id": "a", "_attachments": {
    "t.txt": {"content_type": "text/plain", "data": "aGk="}}}]}), GET("/{db}/a"))
case("bulk_docs.batch_ok", POST("/{db}/_bulk_docs?batch=ok", {"docs": [{"_id": "a"}]}))
case("bulk_docs.all_or_nothing", POST("/{db}/_bulk_docs", {"all_or_nothing": True, "docs": [{"_id": "a"}]}))

# -- _bulk_get ------------------------------------------------------------------------------------------------
case("bulk_get.basic", ABC, POST("/{db}/_bulk_get", {"docs": [{"id": "a"}, {"id": "b", "rev": "{rev:b}"}]}))
case("bulk_get.missing", ABC, POST("/{db}/_bulk_get", {"docs": [{"id": "nosuch"}, {"id": "a", "rev": "1-" + "f" * 32}]}))
case("bulk_get.revs", HISTORY, POST("/{db}/_bulk_get?revs=true", {"docs": [{"id": "h", "rev": H3}]}))
case("bulk_get.latest", HISTORY, POST("/{db}/_bulk_get?latest=true", {"docs": [{"id": "h", "rev": H1}]}))
case("bulk_get.conflict", CONFLICT, POST("/{db}/_bulk_get", {"docs": [{"id": "x"}]}))
case("bulk_get.deleted", ABC, DELETE("/{db}/a?rev={rev:a}"), POST("/{db}/_bulk_get", {"docs": [{"id": "a", "rev": "{rev:a}"}]}))
case("bulk_get.attachments", ATT, POST("/{db}/_bulk_get?attachments=true", {"docs": [{"id": "a"}]}))
case("bulk_get.stubs", ATT, POST("/{db}/_bulk_get", {"docs": [{"id": "a"}]}))
case("bulk_get.no_id", ABC, POST("/{db}/_bulk_get", {"docs": [{"rev": "1-abc"}]}))
case("bulk_get.bad_body", POST("/{db}/_bulk_get", {"docs": 1}))
case("bulk_get.no_docs", POST("/{db}/_bulk_get", {}))
case("bulk_get.empty", POST("/{db}/_bulk_get", {"docs": []}))
case("bulk_get.get", GET("/{db}/_bulk_get"))
case("bulk_get.text_plain", POST("/{db}/_bulk_get", '{"docs":[]}', ctype="text/plain"))
case("bulk_get.multipart", ABC, POST("/{db}/_bulk_get", {"docs": [{"id": "a"}]}, accept="multipart/related"))

# -- _all_docs -----------------------------------------------------------------------------------------------
ALL_DOCS_PARAMS = [
    "", "limit=2", "skip=2", "skip=2&limit=2", "skip=10", "limit=0", "descending=true", "descending=true&limit=2",
    "descending=true&skip=1", "startkey=%22b%22", "start_key=%22b%22", "endkey=%22c%22", "end_key=%22c%22",
    "endkey=%22c%22&inclusive_end=false", "startkey=%22b%22&endkey=%22d%22", "startkey=%22b%22&skip=1",
    "startkey=%22b%22&limit=2", "startkey=%22d%22&descending=true", "startkey=%22d%22&endkey=%22b%22&descending=true",
    "endkey=%22b%22&descending=true&inclusive_end=false", "key=%22c%22", "key=%22missing%22",
    "keys=" + q(["c", "a", "missing"]), "keys=" + q([]), "include_docs=true", "include_docs=true&limit=1",
    "update_seq=true", "conflicts=true&include_docs=true", "startkey=%22bb%22", "startkey=%22z%22",
    "startkey=%22d%22&endkey=%22b%22", "limit=-1", "limit=abc", "skip=-1", "startkey=notjson", "descending=maybe",
    "include_docs=true&attachments=true", "keys=notjson", "startkey_docid=b", "endkey_docid=c",
    "sorted=false", "stable=true", "update=false", "reduce=false", "group=true", "keys=" + q(["a"]) + "&key=%22a%22",
    "include_docs=true&keys=" + q(["a", "missing"]),
]
for i, p in enumerate(ALL_DOCS_PARAMS):
    case("all_docs.get" + ("?" + p if p else ""), ABC, GET("/{db}/_all_docs" + ("?" + p if p else "")))
case("all_docs.deleted_key", ABC, DELETE("/{db}/b?rev={rev:b}"), GET("/{db}/_all_docs?keys=" + q(["a", "b"])))
case("all_docs.deleted_key.include_docs", ABC, DELETE("/{db}/b?rev={rev:b}"),
     GET("/{db}/_all_docs?include_docs=true&keys=" + q(["a", "b"])))
case("all_docs.deleted_not_listed", ABC, DELETE("/{db}/b?rev={rev:b}"), GET("/{db}/_all_docs"))
case("all_docs.conflicts", CONFLICT, GET("/{db}/_all_docs?include_docs=true&conflicts=true"))
case("all_docs.design", ABC, PUT("/{db}/_design/d", {"views": {}}), GET("/{db}/_all_docs"))
case("all_docs.local_hidden", ABC, PUT("/{db}/_local/l", {"n": 1}), GET("/{db}/_all_docs"))
case("all_docs.stubs", ATT, GET("/{db}/_all_docs?include_docs=true"))
case("all_docs.empty", GET("/{db}/_all_docs"))
case("all_docs.missing_db", GET("/nosuchdb/_all_docs"))
case("all_docs.noauth", GET("/{db}/_all_docs", **NOAUTH))
case("all_docs.head", ABC, HEAD("/{db}/_all_docs"))
case("all_docs.extra_segment", GET("/{db}/_all_docs/x"))
case("all_docs.put", PUT("/{db}/_all_docs", {}))
for i, b in enumerate([{"keys": ["c", "a", "missing"]}, {"keys": []}, {"keys": ["a"], "include_docs": True},
                       {"limit": 2}, {"skip": 1, "limit": 1}, {"startkey": "b", "endkey": "c"},
                       {"descending": True, "limit": 2}, {"keys": "notalist"}, {}, {"key": "c"},
                       {"keys": ["a", "b"], "skip": 1}, {"keys": ["a", "b"], "limit": 1},
                       {"keys": ["a", "b"], "descending": True}]):
    case("all_docs.post" + json.dumps(b, separators=(",", ":")), ABC, POST("/{db}/_all_docs", b))
case("all_docs.post.query_and_body", ABC, POST("/{db}/_all_docs?limit=1", {"keys": ["a", "b", "c"]}))
case("all_docs.post.bad_json", POST("/{db}/_all_docs", "{bad", ctype="application/json"))
case("all_docs.post.text_plain", POST("/{db}/_all_docs", '{"keys":[]}', ctype="text/plain"))
case("all_docs.queries", ABC, POST("/{db}/_all_docs/queries", {"queries": [{"keys": ["a", "b"]}, {"limit": 1, "skip": 2},
                                                                             {"startkey": "d"}]}))
case("all_docs.queries.empty", ABC, POST("/{db}/_all_docs/queries", {"queries": []}))
case("all_docs.queries.bad", ABC, POST("/{db}/_all_docs/queries", {"queries": 1}))
case("all_docs.queries.get", ABC, GET("/{db}/_all_docs/queries"))
case("all_docs.queries.include_docs", ABC, POST("/{db}/_all_docs/queries", {"queries": [{"keys": ["a"], "include_docs": True}]}))
DESIGN = [PUT("/{db}/_design/b", {"views": {}}), PUT("/{db}/_design/a", {"language": "javascript"}),
          PUT("/{db}/_design/c", {})]
for i, p in enumerate(["", "limit=1", "skip=1", "descending=true", "include_docs=true", "keys=" + q(["_design/a", "x"]),
                       "startkey=%22_design%2Fb%22", "endkey=%22_design%2Fb%22", "key=%22_design%2Fc%22",
                       "update_seq=true"]):
    case("design_docs.get" + ("?" + p if p else ""), ABC, *DESIGN, GET("/{db}/_design_docs" + ("?" + p if p else "")))
case("design_docs.post", ABC, *DESIGN, POST("/{db}/_design_docs", {"keys": ["_design/a", "a"]}))
case("design_docs.empty", ABC, GET("/{db}/_design_docs"))

# -- _changes --------------------------------------------------------------------------------------------------
CH = [ABC, DELETE("/{db}/c?rev={rev:c}"), PUT("/{db}/a", {"_rev": "{rev:a}", "n": 9})]
CHANGES_PARAMS = [
    "", "since=0", "limit=2", "limit=0", "descending=true", "descending=true&limit=2", "include_docs=true",
    "style=all_docs", "filter=_doc_ids&doc_ids=" + q(["a", "c"]), "filter=_doc_ids", "filter=_design",
    "filter=_view&view=d/v", "filter=d/f", "filter=nosuch", "conflicts=true&include_docs=true",
    "feed=longpoll", "feed=longpoll&limit=1", "feed=normal&heartbeat=true", "feed=longpoll&heartbeat=true",
    "feed=longpoll&heartbeat=100", "since=now", "since=garbage", "limit=abc", "feed=bogus", "timeout=100",
    "seq_interval=2", "include_docs=true&attachments=true", "att_encoding_info=true&include_docs=true",
    "doc_ids=" + q(["a"]), "since=0&limit=1&descending=true", "heartbeat=abc", "heartbeat=-1",
    "feed=longpoll&since=0&timeout=100", "include_docs=true&style=all_docs",
]
for i, p in enumerate(CHANGES_PARAMS):
    case("changes.get" + ("?" + p if p else ""), *CH,
         GET("/{db}/_changes" + ("?" + p if p else "")))
case("changes.since_seq", ABC, GET("/{db}"), PUT("/{db}/z", {"n": 1}), GET("/{db}/_changes?since={seq}"))
case("changes.since_seq.descending", ABC, GET("/{db}"), PUT("/{db}/z", {"n": 1}),
     GET("/{db}/_changes?since={seq}&descending=true"))
case("changes.since_seq.longpoll", ABC, GET("/{db}"), PUT("/{db}/z", {"n": 1}), GET("/{db}/_changes?feed=longpoll&since={seq}"))
case("changes.conflicts.all_docs", CONFLICT, GET("/{db}/_changes?style=all_docs"))
case("changes.conflicts.conflicts", CONFLICT, GET("/{db}/_changes?conflicts=true&include_docs=true"))
case("changes.stubs", ATT, GET("/{db}/_changes?include_docs=true"))
case("changes.attachments", ATT, GET("/{db}/_changes?include_docs=true&attachments=true"))
case("changes.design_filter", ABC, PUT("/{db}/_design/d", {}), GET("/{db}/_changes?filter=_design"))
case("changes.local_hidden", ABC, PUT("/{db}/_local/l", {"n": 1}), GET("/{db}/_changes"), GET("/{db}"))
case("changes.empty", GET("/{db}/_changes"))
case("changes.empty.longpoll_timeout", GET("/{db}/_changes?feed=longpoll&timeout=100"))
case("changes.longpoll.wait", ABC, GET("/{db}"),
     GET("/{db}/_changes?feed=longpoll&since={seq}", during=PUT("/{db}/late", {"n": 1})))
case("changes.longpoll.now_timeout", ABC, GET("/{db}/_changes?feed=longpoll&since=now&timeout=100"))
case("changes.continuous", *CH, GET("/{db}/_changes?feed=continuous&timeout=100", stream=5,
                                    until=lambda t: "last_seq" in t))
case("changes.continuous.since", *CH, GET("/{db}"), PUT("/{db}/z", {}),
     GET("/{db}/_changes?feed=continuous&timeout=100&since={seq}", stream=5, until=lambda t: "last_seq" in t))
case("changes.continuous.limit", *CH, GET("/{db}/_changes?feed=continuous&limit=2&timeout=100", stream=5,
                                          until=lambda t: "last_seq" in t))
case("changes.continuous.include_docs", *CH, GET("/{db}/_changes?feed=continuous&include_docs=true&timeout=100",
                                                 stream=5, until=lambda t: "last_seq" in t))
case("changes.continuous.heartbeat_true", *CH, GET("/{db}/_changes?feed=continuous&heartbeat=true", stream=2,
                                                   until=lambda t: t.count('"id"') >= 5))
case("changes.continuous.heartbeat_ms", *CH, GET("/{db}/_changes?feed=continuous&heartbeat=100", stream=3, until=HEARTBEAT))
case("changes.continuous.doc_ids", *CH, GET("/{db}/_changes?feed=continuous&timeout=100&filter=_doc_ids&doc_ids="
                                            + q(["b"]), stream=5, until=lambda t: "last_seq" in t))
case("changes.continuous.wait", ABC, GET("/{db}"),
     GET("/{db}/_changes?feed=continuous&since={seq}&timeout=2000", stream=5, until=lambda t: '"late"' in t,
         during=PUT("/{db}/late", {"n": 1})))
case("changes.eventsource", *CH, GET("/{db}/_changes?feed=eventsource&timeout=100", stream=5,
                                     until=lambda t: t.count("data:") >= 5, accept="text/event-stream"))
case("changes.eventsource.limit", *CH, GET("/{db}/_changes?feed=eventsource&limit=1&timeout=100", stream=3,
                                           until=lambda t: t.count("data:") >= 1, accept="text/event-stream"))
case("changes.post.doc_ids", *CH, POST("/{db}/_changes?filter=_doc_ids", {"doc_ids": ["a", "b"]}))
case("changes.post.doc_ids.noquery", *CH, POST("/{db}/_changes", {"doc_ids": ["a"]}))
case("changes.post.empty", *CH, POST("/{db}/_changes", {}))
case("changes.post.bad_json", POST("/{db}/_changes", "{bad", ctype="application/json"))
case("changes.post.selector", *CH, POST("/{db}/_changes?filter=_selector", {"selector": {"n": {"$gt": 1}}}))
case("changes.missing_db", GET("/nosuchdb/_changes"))
case("changes.noauth", GET("/{db}/_changes", **NOAUTH))
case("changes.extra_segment", GET("/{db}/_changes/x"))
case("changes.put", PUT("/{db}/_changes", {}))
case("changes.delete", DELETE("/{db}/_changes"))

# -- _local ------------------------------------------------------------------------------------------------
case("local.put", PUT("/{db}/_local/l", {"n": 1}))
case("local.get", PUT("/{db}/_local/l", {"n": 1}), GET("/{db}/_local/l"))
case("local.update", PUT("/{db}/_local/l", {"n": 1}), PUT("/{db}/_local/l", {"_rev": "0-1", "n": 2}), GET("/{db}/_local/l"))
case("local.update.conflict", PUT("/{db}/_local/l", {"n": 1}), PUT("/{db}/_local/l", {"n": 2}))
case("local.update.stale", PUT("/{db}/_local/l", {"n": 1}), PUT("/{db}/_local/l", {"_rev": "0-1", "n": 2}),
     PUT("/{db}/_local/l", {"_rev": "0-1", "n": 3}))
case("local.delete", PUT("/{db}/_local/l", {"n": 1}), DELETE("/{db}/_local/l?rev=0-1"), GET("/{db}/_local/l"))
case("local.delete.norev", PUT("/{db}/_local/l", {"n": 1}), DELETE("/{db}/_local/l"))
case("local.get.missing", GET("/{db}/_local/nosuch"))
case("local.get.revs", PUT("/{db}/_local/l", {"n": 1}), GET("/{db}/_local/l?revs=true"))
case("local.head", PUT("/{db}/_local/l", {"n": 1}), HEAD("/{db}/_local/l"))
case("local.slash_id", PUT("/{db}/_local/a%2Fb", {"n": 1}), GET("/{db}/_local/a%2Fb"))
case("local.docs", PUT("/{db}/_local/l", {"n": 1}), PUT("/{db}/_local/m", {"n": 2}), GET("/{db}/_local_docs"))
case("local.docs.include_docs", PUT("/{db}/_local/l", {"n": 1}), GET("/{db}/_local_docs?include_docs=true"))
case("local.noauth", PUT("/{db}/_local/l", {"n": 1}, **NOAUTH))
case("local.copy", PUT("/{db}/_local/l", {"n": 1}), COPY("/{db}/_local/l", headers={"Destination": "_local/m"}))
case("local.bad_json", PUT("/{db}/_local/l", "{bad", ctype="application/json"))
case("local.empty_id", PUT("/{db}/_local/", {"n": 1}))
case("local.post_db", POST("/{db}", {"_id": "_local/p", "n": 1}), GET("/{db}/_local/p"))

# -- design documents ---------------------------------------------------------------------------------------
case("design.put", PUT("/{db}/_design/d", {"views": {"v": {"map": "function(doc){emit(doc._id,1)}"}}}), GET("/{db}/_design/d"))
case("design.put.encoded", PUT("/{db}/_design%2Fd", {"views": {}}), GET("/{db}/_design/d"))
case("design.get.encoded", PUT("/{db}/_design/d", {"views": {}}), GET("/{db}/_design%2Fd"))
case("design.delete", PUT("/{db}/_design/d", {}), DELETE("/{db}/_design/d?rev={rev:_design/d}"))
case("design.info", PUT("/{db}/_design/d", {"views": {}}), GET("/{db}/_design/d/_info"))
case("design.view", PUT("/{db}/_design/d", {"views": {"v": {"map": "function(doc){emit(doc._id,1)}"}}}),
     GET("/{db}/_design/d/_view/v"))
case("design.view.missing_ddoc", GET("/{db}/_design/nosuch/_view/v"))
case("design.show", PUT("/{db}/_design/d", {"shows": {"s": "function(doc,req){return 'x'}"}}), GET("/{db}/_design/d/_show/s"))
case("design.list", PUT("/{db}/_design/d", {}), GET("/{db}/_design/d/_list/l/v"))
case("design.update", PUT("/{db}/_design/d", {}), POST("/{db}/_design/d/_update/u", {}))
case("design.attachment", PUT("/{db}/_design/d", {}), PUT("/{db}/_design/d/f.txt?rev={rev:_design/d}", b"hi", ctype="text/plain"),
     GET("/{db}/_design/d/f.txt"))
case("design.copy", PUT("/{db}/_design/d", {"x": 1}), COPY("/{db}/_design/d", headers={"Destination": "_design/e"}),
     GET("/{db}/_design/e"))
case("design.view_cleanup", POST("/{db}/_view_cleanup", {}))
case("design.compact_ddoc", PUT("/{db}/_design/d", {}), POST("/{db}/_compact/d", {}))

# -- attachments -------------------------------------------------------------------------------------------
case("att.put.new_doc", ATT)
case("att.get", ATT, GET("/{db}/a/hello.txt", accept=None))
case("att.get.gzip", ATT, GET("/{db}/a/hello.txt", accept=None, headers={"Accept-Encoding": "gzip"}))
case("att.get.binary", ATT_BIN, GET("/{db}/b/blob.bin", accept=None))
case("att.head", ATT, HEAD("/{db}/a/hello.txt", accept=None))
case("att.get.missing", ATT, GET("/{db}/a/nosuch.txt"))
case("att.get.missing_doc", GET("/{db}/nosuch/hello.txt"))
case("att.get.rev", ATT, PUT("/{db}/a/hello.txt?rev={rev:a}", b"hello again", ctype="text/plain"),
     GET("/{db}/a/hello.txt?rev={rev:a@1}", accept=None))
case("att.get.if_none_match", ATT, GET("/{db}/a/hello.txt", accept=None, headers={"If-None-Match": '"md5-XUFAKrxLKna5cZ2REBfFkg=="'}))
case("att.range", ATT_BIN, GET("/{db}/b/blob.bin", accept=None, headers={"Range": "bytes=0-9"}))
case("att.range.suffix", ATT_BIN, GET("/{db}/b/blob.bin", accept=None, headers={"Range": "bytes=-5"}))
case("att.range.open", ATT_BIN, GET("/{db}/b/blob.bin", accept=None, headers={"Range": "bytes=1020-"}))
case("att.range.outside", ATT_BIN, GET("/{db}/b/blob.bin", accept=None, headers={"Range": "bytes=5000-6000"}))
case("att.range.multi", ATT_BIN, GET("/{db}/b/blob.bin", accept=None, headers={"Range": "bytes=0-1,5-6"}))
case("att.range.bad", ATT_BIN, GET("/{db}/b/blob.bin", accept=None, headers={"Range": "items=0-1"}))
case("att.put.existing_doc", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a/t.txt?rev={rev:a}", b"hi", ctype="text/plain"),
     GET("/{db}/a"))
case("att.put.norev", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a/t.txt", b"hi", ctype="text/plain"))
case("att.put.stale", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a", {"_rev": "{rev:a}", "n": 2}),
     PUT("/{db}/a/t.txt?rev={rev:a@1}", b"hi", ctype="text/plain"))
case("att.put.if_match", PUT("/{db}/a", {"n": 1}), PUT("/{db}/a/t.txt", b"hi", ctype="text/plain",
                                                          headers={"If-Match": '"{rev:a}"'}))
case("att.put.no_ctype", PUT("/{db}/a/t.bin", b"raw"), GET("/{db}/a/t.bin", accept=None))
case("att.put.gzip_encoded", PUT("/{db}/a/t.txt", b"hello gzip", ctype="text/plain", gzip=True),
     GET("/{db}/a/t.txt", accept=None), GET("/{db}/a"))
case("att.put.empty", PUT("/{db}/a/e.txt", b"", ctype="text/plain"), GET("/{db}/a"))
case("att.put.nested_name", PUT("/{db}/a/dir/f.txt", b"x", ctype="text/plain"), GET("/{db}/a/dir/f.txt", accept=None),
     GET("/{db}/a"))
case("att.put.underscore_name", PUT("/{db}/a/_x.txt", b"x", ctype="text/plain"))
case("att.put.missing_db", PUT("/nosuchdb/a/t.txt", b"x", ctype="text/plain"))
case("att.delete", ATT, DELETE("/{db}/a/hello.txt?rev={rev:a}"), GET("/{db}/a"))
case("att.delete.norev", ATT, DELETE("/{db}/a/hello.txt"))
case("att.delete.missing", ATT, DELETE("/{db}/a/nosuch.txt?rev={rev:a}"))
case("att.stub", ATT, GET("/{db}/a"))
case("att.stub.binary", ATT_BIN, GET("/{db}/b"))
case("att.inline", INLINE, GET("/{db}/i"))
case("att.inline.attachments", INLINE, GET("/{db}/i?attachments=true"))
case("att.inline.att_encoding_info", INLINE, GET("/{db}/i?att_encoding_info=true"))
case("att.inline.atts_since", INLINE, PUT("/{db}/i", {"_rev": "{rev:i}", "n": 2, "_attachments": {
    "note.txt": {"stub": True}, "raw.bin": {"stub": True}}}), GET("/{db}/i?atts_since=" + q(["{rev:i@1}"])))
case("att.inline.bad_base64", PUT("/{db}/i", {"_attachments": {"x": {"content_type": "text/plain", "data": "!!!"}}}))
case("att.stub.keep", INLINE, PUT("/{db}/i", {"_rev": "{rev:i}", "n": 2, "_attachments": {
    "note.txt": {"stub": True}}}), GET("/{db}/i"))
case("att.stub.missing", PUT("/{db}/i", {"_attachments": {"x": {"stub": True}}}))
case("att.stub.missing_stub_flag", INLINE, PUT("/{db}/i", {"_rev": "{rev:i}", "_attachments": {
    "note.txt": {"content_type": "text/plain", "digest": "md5-XrY7u+Ae7tCTyyK7j1rNww==", "length": 11}}}))
case("att.stub.revpos", INLINE, GET("/{db}/i?revs=true"))
case("att.open_revs", INLINE, GET("/{db}/i?open_revs=all"))
case("att.open_revs.multipart", INLINE, GET("/{db}/i?open_revs=all&attachments=true", accept="multipart/mixed"))
case("att.doc.multipart", INLINE, GET("/{db}/i?attachments=true", accept="multipart/related"))
case("att.all_docs", INLINE, GET("/{db}/_all_docs?include_docs=true&attachments=true"))
case("att.text_then_get_gzip_accept", INLINE, GET("/{db}/i/note.txt", accept=None, headers={"Accept-Encoding": "gzip"}))

# -- _revs_diff, _missing_revs -------------------------------------------------------------------------------
case("revs_diff.basic", HISTORY, POST("/{db}/_revs_diff", {"h": [H3, "3-" + "d" * 32], "nosuch": [H1]}))
case("revs_diff.none_missing", HISTORY, POST("/{db}/_revs_diff", {"h": [H3, H1]}))
case("revs_diff.empty", POST("/{db}/_revs_diff", {}))
case("revs_diff.bad", POST("/{db}/_revs_diff", [1]))
case("revs_diff.bad_rev", HISTORY, POST("/{db}/_revs_diff", {"h": ["bogus"]}))
case("revs_diff.not_list", HISTORY, POST("/{db}/_revs_diff", {"h": H1}))
case("revs_diff.get", GET("/{db}/_revs_diff"))
case("revs_diff.text_plain", POST("/{db}/_revs_diff", "{}", ctype="text/plain"))
case("revs_diff.conflict", CONFLICT, POST("/{db}/_revs_diff", {"x": [H1, H2, "2-" + "e" * 32]}))
case("missing_revs.basic", HISTORY, POST("/{db}/_missing_revs", {"h": [H3, "3-" + "d" * 32], "nosuch": [H1]}))
case("missing_revs.empty", POST("/{db}/_missing_revs", {}))

# -- _session ----------------------------------------------------------------------------------------------
case("session.get.basic", GET("/_session"))
case("session.get.anon", GET("/_session", **NOAUTH))
case("session.get.wrong", GET("/_session", auth=("nobody", "wrong")))
case("session.post.form", POST("/_session", "name=admin&password=admin-pass", ctype="application/x-www-form-urlencoded", **NOAUTH))
case("session.post.json", POST("/_session", {"name": "admin", "password": "admin-pass"}, **NOAUTH))
case("session.post.wrong", POST("/_session", {"name": "admin", "password": "nope"}, **NOAUTH))
case("session.post.missing", POST("/_session", {}, **NOAUTH))
case("session.post.text_plain", POST("/_session", "name=admin", ctype="text/plain", **NOAUTH))
case("session.post.next", POST("/_session?next=/", {"name": "admin", "password": "admin-pass"}, **NOAUTH))
case("session.delete", DELETE("/_session", **NOAUTH))
case("session.put", PUT("/_session", {}, **NOAUTH))
case("session.cookie_bad", GET("/_session", headers={"Cookie": "AuthSession=!!!"}, **NOAUTH))

# -- _security, _users ------------------------------------------------------------------------------------
SEC = {"admins": {"names": [], "roles": []}, "members": {"names": ["bob"], "roles": []}}
case("security.get", GET("/{db}/_security"))
case("security.put", PUT("/{db}/_security", SEC), GET("/{db}/_security"))
case("security.put.bad", PUT("/{db}/_security", [1]))
case("security.noauth", GET("/{db}/_security", **NOAUTH))
case("security.missing_db", GET("/nosuchdb/_security"))
def user(name):
    return {"_id": f"org.couchdb.user:{name}", "name": name, "type": "user", "roles": [], "password": f"{name}-pass"}


case("users.db", GET("/_users"))
case("users.put", PUT("/_users/org.couchdb.user:bob", user("bob")), GET("/_users/org.couchdb.user:bob"),
     DELETE("/_users/org.couchdb.user:bob?rev={rev:org.couchdb.user:bob}"))
case("users.login", PUT("/_users/org.couchdb.user:carol", user("carol")), GET("/_session", auth=("carol", "carol-pass")),
     DELETE("/_users/org.couchdb.user:carol?rev={rev:org.couchdb.user:carol}"))
case("users.recreate", PUT("/_users/org.couchdb.user:dave", user("dave")),
     DELETE("/_users/org.couchdb.user:dave?rev={rev:org.couchdb.user:dave}"),
     PUT("/_users/org.couchdb.user:dave", user("dave")), DELETE("/_users/org.couchdb.user:dave?rev={rev:org.couchdb.user:dave}"))
case("users.wrong_id", PUT("/_users/org.couchdb.user:erin", {**user("frank"), "_id": "org.couchdb.user:erin"}))
case("users.no_prefix", PUT("/_users/erin", {**user("erin"), "_id": "erin"}))
case("users.session_roles", PUT("/_users/org.couchdb.user:gina", {**user("gina"), "roles": ["r1"]}),
     GET("/_session", auth=("gina", "gina-pass")),
     DELETE("/_users/org.couchdb.user:gina?rev={rev:org.couchdb.user:gina}"))
case("users.bad_doc", PUT("/_users/org.couchdb.user:eve", {"name": "eve"}))
case("users.all_docs", GET("/_users/_all_docs"))

# -- _replicate, _active_tasks, _scheduler ------------------------------------------------------------------
REP_CHECK = GET("/{db2}/_all_docs?include_docs=true")
case("replicate.urls", ABC, POST("/_replicate", {"source": "{url}/{db}", "target": "{url}/{db2}"},
                                 ignore=["json:$.history*", "json:$.*_seq", "json:$.replication_id_version"]),
     REP_CHECK, dbs=2)
case("replicate.objects", ABC, POST("/_replicate", {"source": {"url": "{url}/{db}"}, "target": {"url": "{url}/{db2}"}},
                                    ignore=["json:$.history*", "json:$.*_seq"]), REP_CHECK, dbs=2)
case("replicate.headers", ABC, POST("/_replicate", {
    "source": {"url": "http://{host}/{db}", "headers": {"Authorization": "Basic YWRtaW46YWRtaW4tcGFzcw=="}},
    "target": {"url": "http://{host}/{db2}", "headers": {"Authorization": "Basic YWRtaW46YWRtaW4tcGFzcw=="}}},
    ignore=["json:$.history*", "json:$.*_seq"]), REP_CHECK, dbs=2)
case("replicate.local_names", ABC, POST("/_replicate", {"source": "{db}", "target": "{db2}"},
                                        ignore=["json:$.history*", "json:$.*_seq"]), REP_CHECK, dbs=2)
case("replicate.create_target", ABC, POST("/_replicate", {"source": "{url}/{db}", "target": "{url}/{db}-made", "create_target": True},
                                          ignore=["json:$.history*", "json:$.*_seq"]),
     GET("/{db}-made/_all_docs"), DELETE("/{db}-made"))
case("replicate.doc_ids", ABC, POST("/_replicate", {"source": "{url}/{db}", "target": "{url}/{db2}", "doc_ids": ["a", "c"]},
                                    ignore=["json:$.history*", "json:$.*_seq"]), REP_CHECK, dbs=2)
case("replicate.missing_target", ABC, POST("/_replicate", {"source": "{url}/{db}", "target": "{url}/nosuchdb"},
                                           ignore=["json:$.history*", "json:$.*_seq"]))
case("replicate.missing_source", POST("/_replicate", {"source": "{url}/nosuchdb", "target": "{url}/{db}"}))
case("replicate.no_body", POST("/_replicate", {}))
case("replicate.bad_json", POST("/_replicate", "{bad", ctype="application/json"))
case("replicate.get", GET("/_replicate"))
case("replicate.noauth", POST("/_replicate", {"source": "{url}/{db}", "target": "{url}/{db}"}, **NOAUTH))
case("replicate.conflicts", CONFLICT, POST("/_replicate", {"source": "{url}/{db}", "target": "{url}/{db2}"},
                                           ignore=["json:$.history*", "json:$.*_seq"]),
     GET("/{db2}/x?conflicts=true"), dbs=2)
case("replicate.attachments", INLINE, POST("/_replicate", {"source": "{url}/{db}", "target": "{url}/{db2}"},
                                           ignore=["json:$.history*", "json:$.*_seq"]),
     GET("/{db2}/i?attachments=true"), dbs=2)

# -- _find -------------------------------------------------------------------------------------------------
FIND_IGNORE = ["json:$.warning", "json:$.bookmark"]
for i, b in enumerate([{"selector": {"n": {"$gt": 1}}}, {"selector": {"n": 2}}, {"selector": {"_id": "c"}},
                       {"selector": {"n": {"$gte": 1}}, "limit": 2}, {"selector": {"n": {"$gte": 1}}, "skip": 2},
                       {"selector": {"n": {"$in": [1, 3]}}}, {"selector": {"n": {"$exists": True}}, "fields": ["_id"]},
                       {"selector": {"$or": [{"n": 0}, {"n": 4}]}}, {"selector": {"$and": [{"n": {"$gt": 0}}, {"n": {"$lt": 3}}]}},
                       {"selector": {"n": {"$ne": 2}}}, {"selector": {"n": {"$lte": 1}}, "fields": ["n"]},
                       {"selector": {"missing": {"$exists": False}}, "limit": 1},
                       {"selector": {"_id": {"$gt": "b"}}, "sort": [{"_id": "asc"}]},
                       {}, {"selector": "x"}, {"selector": {"n": {"$bogus": 1}}}, {"selector": {"n": 1}, "limit": -1},
                       {"selector": {"n": {"$gt": 1}}, "execution_stats": True}]):
    case("find" + json.dumps(b, separators=(",", ":")), ABC, POST("/{db}/_find", b, ignore=FIND_IGNORE))
case("find.get", GET("/{db}/_find"))
case("find.text_plain", POST("/{db}/_find", '{"selector":{}}', ctype="text/plain"))
case("find.design_hidden", ABC, PUT("/{db}/_design/d", {"n": 1}), POST("/{db}/_find", {"selector": {"n": 1}}, ignore=FIND_IGNORE))
case("find.deleted_hidden", ABC, DELETE("/{db}/b?rev={rev:b}"), POST("/{db}/_find", {"selector": {"n": {"$gte": 0}}},
                                                                      ignore=FIND_IGNORE))
case("find.stubs", ATT, POST("/{db}/_find", {"selector": {"_id": "a"}}, ignore=FIND_IGNORE))
case("find.missing_db", POST("/nosuchdb/_find", {"selector": {}}))
case("index.get", GET("/{db}/_index"))
case("explain", ABC, POST("/{db}/_explain", {"selector": {"n": 1}}))

# -- maintenance --------------------------------------------------------------------------------------------
case("ensure_full_commit", POST("/{db}/_ensure_full_commit", ctype="application/json"))
case("ensure_full_commit.body", POST("/{db}/_ensure_full_commit", {}))
case("ensure_full_commit.get", GET("/{db}/_ensure_full_commit"))
case("compact", POST("/{db}/_compact", ctype="application/json"))
case("compact.body", POST("/{db}/_compact", {}))
case("compact.text_plain", POST("/{db}/_compact", "", ctype="text/plain"))
case("compact.get", GET("/{db}/_compact"))
case("compact.noauth", POST("/{db}/_compact", {}, **NOAUTH))
case("revs_limit.get", GET("/{db}/_revs_limit"))
case("revs_limit.put.same", GET("/{db}/_revs_limit"), PUT("/{db}/_revs_limit", "1000", ctype="application/json"))
case("revs_limit.put.bad", PUT("/{db}/_revs_limit", '"x"', ctype="application/json"))
case("revs_limit.post", POST("/{db}/_revs_limit", {}))
case("purge", ABC, POST("/{db}/_purge", {"a": ["{rev:a}"]}), GET("/{db}/a"), GET("/{db}"))
case("purge.unknown", ABC, POST("/{db}/_purge", {"a": ["1-" + "f" * 32], "nosuch": [H1]}))
case("purge.bad", POST("/{db}/_purge", [1]))
case("purge.get", GET("/{db}/_purge"))
case("purged_infos_limit", GET("/{db}/_purged_infos_limit"))
case("db.shards", GET("/{db}/_shards"))

# -- cookies --------------------------------------------------------------------------------------------
LOGIN = POST("/_session", {"name": "admin", "password": "admin-pass"}, **NOAUTH)
case("session.cookie.get", LOGIN, GET("/_session", headers={"Cookie": "{cookie}"}, **NOAUTH))
case("session.cookie.db", LOGIN, GET("/{db}", headers={"Cookie": "{cookie}"}, **NOAUTH))
case("session.cookie.write", LOGIN, PUT("/{db}/a", {"n": 1}, headers={"Cookie": "{cookie}"}, **NOAUTH))
case("session.cookie.delete", LOGIN, DELETE("/_session", headers={"Cookie": "{cookie}"}, **NOAUTH))
case("session.cookie.forged", GET("/_session", headers={"Cookie": "AuthSession=YWRtaW46NjVBQjAwMDA6AAAA"}, **NOAUTH))
case("session.cookie.wins_over_bad_basic", LOGIN, GET("/{db}", headers={"Cookie": "{cookie}"}, auth=("admin", "wrong")))
case("session.post.form.next", POST("/_session?next=/{db}", "name=admin&password=admin-pass",
                                    ctype="application/x-www-form-urlencoded", **NOAUTH))

# -- CORS (both servers allow http://app.example, with credentials) --------------------------------------
ORIGIN = {"Origin": "http://app.example"}
for name, path in (("db", "/{db}"), ("doc", "/{db}/a"), ("session", "/_session"), ("root", "/"), ("changes", "/{db}/_changes"),
                   ("bulk_docs", "/{db}/_bulk_docs")):
    case(f"cors.preflight.{name}", REQ("OPTIONS", path, headers={**ORIGIN, "Access-Control-Request-Method": "GET"}, **NOAUTH))
    case(f"cors.simple.{name}", GET(path, headers=ORIGIN))
case("cors.preflight.put_headers", REQ("OPTIONS", "/{db}/a", headers={
    **ORIGIN, "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "content-type, authorization"}, **NOAUTH))
case("cors.preflight.custom_header", REQ("OPTIONS", "/{db}/a", headers={
    **ORIGIN, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "x-custom"}, **NOAUTH))
case("cors.preflight.other_origin", REQ("OPTIONS", "/{db}", headers={
    "Origin": "http://evil.example", "Access-Control-Request-Method": "GET"}, **NOAUTH))
case("cors.preflight.bad_method", REQ("OPTIONS", "/{db}", headers={**ORIGIN, "Access-Control-Request-Method": "TRACE"}, **NOAUTH))
case("cors.simple.other_origin", GET("/{db}", headers={"Origin": "http://evil.example"}))
case("cors.simple.noauth", GET("/{db}", headers=ORIGIN, **NOAUTH))
case("cors.simple.error", GET("/{db}/nosuch", headers=ORIGIN))
case("cors.simple.write", PUT("/{db}/a", {"n": 1}, headers=ORIGIN))
case("cors.options.no_origin", REQ("OPTIONS", "/{db}", **NOAUTH))

# -- _security enforced -------------------------------------------------------------------------------------
HANK = ("hank", "hank-pass")
case("security.members.enforced", PUT("/_users/org.couchdb.user:hank", user("hank")),
     PUT("/{db}/_security", {"admins": {"names": [], "roles": []}, "members": {"names": ["hank"], "roles": []}}),
     GET("/{db}", auth=HANK), PUT("/{db}/a", {"n": 1}, auth=HANK), GET("/{db}/a", auth=HANK),
     GET("/{db}/_security", auth=HANK), PUT("/{db}/_security", SEC, auth=HANK), PUT("/{db}/_design/d", {}, auth=HANK),
     DELETE("/_users/org.couchdb.user:hank?rev={rev:org.couchdb.user:hank}"))
case("security.nonmember", PUT("/_users/org.couchdb.user:ivy", user("ivy")),
     PUT("/{db}/_security", {"members": {"names": ["someoneelse"], "roles": []}}),
     GET("/{db}", auth=("ivy", "ivy-pass")), GET("/{db}/_all_docs", auth=("ivy", "ivy-pass")),
     DELETE("/_users/org.couchdb.user:ivy?rev={rev:org.couchdb.user:ivy}"))
case("security.role_member", PUT("/_users/org.couchdb.user:jack", {**user("jack"), "roles": ["team"]}),
     PUT("/{db}/_security", {"members": {"names": [], "roles": ["team"]}}),
     GET("/{db}", auth=("jack", "jack-pass")), PUT("/{db}/a", {"n": 1}, auth=("jack", "jack-pass")),
     DELETE("/_users/org.couchdb.user:jack?rev={rev:org.couchdb.user:jack}"))
case("security.db_admin", PUT("/_users/org.couchdb.user:kim", user("kim")),
     PUT("/{db}/_security", {"admins": {"names": ["kim"], "roles": []}}),
     PUT("/{db}/_design/d", {}, auth=("kim", "kim-pass")), PUT("/{db}/_security", SEC, auth=("kim", "kim-pass")),
     DELETE("/{db}", auth=("kim", "kim-pass")), PUT("/{db}?q=1"),
     DELETE("/_users/org.couchdb.user:kim?rev={rev:org.couchdb.user:kim}"))
case("security.get.after_put_empty", PUT("/{db}/_security", {}), GET("/{db}/_security"))
case("security.user_no_roles", PUT("/_users/org.couchdb.user:lee", user("lee")),
     GET("/{db}", auth=("lee", "lee-pass")), GET("/_all_dbs", auth=("lee", "lee-pass")),
     DELETE("/_users/org.couchdb.user:lee?rev={rev:org.couchdb.user:lee}"))
