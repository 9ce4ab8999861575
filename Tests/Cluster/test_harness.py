"""Unit tests of the harness's pure parts (checker rules, fault planning); no root needed.

    python3 -m unittest discover -s Tests/Cluster -p 'test_*.py'
"""

import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fcluster import checker  # noqa: E402
from fcluster.nemesis import GROUPS, KINDS, plan  # noqa: E402
from fcluster.sweep import parse_seeds, percentile  # noqa: E402


def op(t0, t1, participant, kind, doc, outcome="ok", token=None, body=None, rev=None, attachments=None, **kw):
    rec = {"type": "op", "t": t1, "t_start": t0, "t_end": t1, "client": kw.get("client", "c1"),
           "participant": participant, "op": kind, "id": doc, "outcome": outcome, "rev": rev}
    if token:
        rec["token"] = token
        rec["body"] = body if body is not None else {"w": token}
    if attachments:
        rec["attachments"] = attachments
    rec.update({k: v for k, v in kw.items() if k != "client"})
    return rec


def live(doc, rev, body, leaves=None):
    return {"id": doc, "rev": rev, "deleted": False, "body": body, "conflicts": [],
            "leaves": leaves if leaves is not None else [{"rev": rev, "deleted": False}]}


def dead(doc, rev, leaves=None):
    return {"id": doc, "rev": rev, "deleted": True, "body": {}, "conflicts": [],
            "leaves": leaves if leaves is not None else [{"rev": rev, "deleted": True}]}


CONVERGED = {"type": "converge", "t": 99, "converged": True, "time_to_converge": 0.5}


def kinds(verdict):
    return sorted(f.kind for f in verdict.findings)


class CheckerTests(unittest.TestCase):
    def test_identical_states_pass(self):
        h = [op(1, 2, "h1", "put", "d", token="c1-1", rev="1-aa"), CONVERGED]
        s = {"h1": {"d": live("d", "1-aa", {"w": "c1-1"})}, "h2": {"d": live("d", "1-aa", {"w": "c1-1"})}}
        v = checker.check(h, s)
        self.assertTrue(v.passed, v.findings)
        self.assertEqual(v.time_to_converge, 0.5)

    def test_divergence_and_absent_vs_deleted(self):
        h = [op(1, 2, "h1", "delete", "d", rev="2-bb"), CONVERGED]
        s = {"h1": {"d": dead("d", "2-bb")}, "h2": {}}
        self.assertIn("divergent", kinds(checker.check(h, s)))

    def test_tombstones_must_match(self):
        s = {"h1": {"d": dead("d", "2-bb")}, "h2": {"d": dead("d", "2-cc")}}
        self.assertIn("divergent", kinds(checker.check([CONVERGED], s)))

    def test_never_converged_fails(self):
        v = checker.check([{"type": "converge", "t": 1, "converged": False, "time_to_converge": None}], {"h1": {}})
        self.assertFalse(v.passed)

    def test_lost_write(self):
        h = [op(1, 2, "h1", "put", "d", token="c1-1", rev="1-aa"), CONVERGED]
        s = {"h1": {"d": dead("d", "2-bb")}, "h2": {"d": dead("d", "2-bb")}}
        self.assertEqual(kinds(checker.check(h, s)), ["lost-write"])

    def test_delete_on_other_host_before_put_excuses_it(self):
        # deletion wins over a concurrent update: an earlier delete elsewhere may be concurrent
        h = [op(1, 2, "h2", "delete", "d", rev="3-dd"),
             op(3, 4, "h1", "put", "d", token="c1-1", rev="3-aa"), CONVERGED]
        s = {"h1": {"d": dead("d", "3-dd")}, "h2": {"d": dead("d", "3-dd")}}
        self.assertTrue(checker.check(h, s).passed)

    def test_delete_acknowledged_on_same_host_before_put_does_not_excuse(self):
        h = [op(1, 2, "h1", "delete", "d", rev="3-dd"),
             op(3, 4, "h1", "put", "d", token="c1-1", rev="4-aa"), CONVERGED]
        s = {"h1": {"d": dead("d", "3-dd")}, "h2": {"d": dead("d", "3-dd")}}
        self.assertEqual(kinds(checker.check(h, s)), ["lost-write"])

    def test_failed_delete_never_excuses(self):
        h = [op(3, 3.5, "h2", "delete", "d", outcome="failed"),
             op(1, 4, "h1", "put", "d", token="c1-1", rev="1-aa"), CONVERGED]
        s = {"h1": {}, "h2": {}}
        self.assertEqual(kinds(checker.check(h, s)), ["lost-write"])

    def test_lost_delete(self):
        h = [op(1, 2, "h1", "put", "d", token="c1-1", rev="1-aa"),
             op(3, 4, "h2", "delete", "d", rev="2-bb"), CONVERGED]
        s = {"h1": {"d": live("d", "1-aa", {"w": "c1-1"})}, "h2": {"d": live("d", "1-aa", {"w": "c1-1"})}}
        self.assertEqual(kinds(checker.check(h, s)), ["lost-delete"])

    def test_a_replayed_delete_counts_when_its_revision_was_first_made(self):
        # The library client, not yet told of the delete and the put after it, deletes the same
        # revision: the same tombstone ID, the same event; the later put stays live.
        h = [op(1, 2, "h1", "put", "d", token="c1-1", rev="1-aa"),
             op(3, 4, "h2", "delete", "d", rev="2-bb"),
             op(5, 6, "h2", "put", "d", token="c1-2", rev="3-cc"),
             op(7, 8, "lib", "delete", "d", rev="2-bb", client="lib"), CONVERGED]
        s = {"h1": {"d": live("d", "3-cc", {"w": "c1-2"})}, "h2": {"d": live("d", "3-cc", {"w": "c1-2"})}}
        self.assertTrue(checker.check(h, s).passed, checker.check(h, s).findings)

    def test_unrelated_lives_survive_a_delete_of_another(self):
        h = [op(1, 2, "h1", "put", "d", token="c1-1", rev="1-aa"),
             op(1, 2, "h2", "put", "d", token="c2-1", rev="1-cc", client="c2"),
             op(3, 4, "h2", "delete", "d", rev="2-bb"), CONVERGED]
        s = {"h1": {"d": live("d", "1-aa", {"w": "c1-1"})}}
        self.assertTrue(checker.check(h, s).passed)

    def test_overlapping_put_excuses_live_after_delete(self):
        h = [op(1, 3.5, "h1", "put", "d", token="c1-1", rev="1-aa"),
             op(3, 4, "h2", "delete", "d", rev="2-bb"), CONVERGED]
        s = {"h1": {"d": live("d", "1-aa", {"w": "c1-1"})}}
        self.assertTrue(checker.check(h, s).passed)

    def test_unanswered_library_op_may_take_effect_later(self):
        h = [op(1, 11, "lib", "put", "d", outcome="ambiguous", token="lib-1", rev=None, seq=1, client="lib"),
             op(12, 13, "h2", "delete", "d", rev="2-bb"), CONVERGED]
        s = {"h2": {"d": live("d", "3-cc", {"w": "lib-1"})}}
        self.assertTrue(checker.check(h, s).passed)

    def test_late_answer_is_an_acknowledgement(self):
        h = [op(1, 11, "lib", "put", "d", outcome="ambiguous", token="lib-1", seq=7, client="lib"),
             {"type": "late", "t": 20, "client": "lib", "seq": 7, "ok": True, "rev": "1-aa"}, CONVERGED]
        s = {"h1": {"d": dead("d", "2-bb")}}
        self.assertEqual(kinds(checker.check(h, s)), ["lost-write"])

    def test_phantom_and_unknown_bodies(self):
        h = [op(1, 2, "h1", "put", "d", outcome="failed", token="c1-1"),
             op(1, 2, "h1", "put", "e", token="c1-2", rev="1-aa"), CONVERGED]
        s = {"h1": {"d": live("d", "1-xx", {"w": "c1-1"}), "e": live("e", "1-aa", {"w": "c1-2", "x": 1}),
                    "f": live("f", "1-ff", {"w": "nobody"})}}
        self.assertEqual(kinds(checker.check(h, s)), ["phantom-write", "unknown-body", "unknown-body"])

    def test_attachments(self):
        att = {"name": "a.bin", "digest": "sha1-AAA=", "length": 3}
        h = [op(1, 2, "h1", "put", "d", token="c1-1", rev="2-aa", attachments=[att]), CONVERGED]
        good = {"w": "c1-1", "_attachments": {"a.bin": {"digest": "sha1-AAA=", "length": 3, "revpos": 2}}}
        self.assertTrue(checker.check(h, {"h1": {"d": live("d", "2-aa", good)}}).passed)
        bad = {"w": "c1-1", "_attachments": {"a.bin": {"digest": "sha1-BBB=", "length": 3, "revpos": 2}}}
        self.assertEqual(kinds(checker.check(h, {"h1": {"d": live("d", "2-aa", bad)}})), ["unknown-attachment"])
        late = {"w": "c1-1", "_attachments": {"a.bin": {"digest": "sha1-AAA=", "length": 3, "revpos": 3}}}
        self.assertEqual(kinds(checker.check(h, {"h1": {"d": live("d", "2-aa", late)}})), ["invalid-revpos"])

    def test_conflict_rules(self):
        h = [op(1, 2, "h1", "put", "d", token="c1-1", rev="2-bb"), CONVERGED]
        two_live = live("d", "2-bb", {"w": "c1-1"}, leaves=[{"rev": "2-bb", "deleted": False},
                                                             {"rev": "2-aa", "deleted": False}])
        self.assertIn("open-conflict", kinds(checker.check(h, {"h1": {"d": two_live}})))
        wrong = live("d", "2-aa", {"w": "c1-1"}, leaves=[{"rev": "2-aa", "deleted": True},
                                                          {"rev": "2-bb", "deleted": False}])
        self.assertIn("wrong-winner", kinds(checker.check(h, {"h1": {"d": wrong}})))
        # tombstones only: which is current depends on closed branches, unknown without "closed"
        tombs = dead("d", "3-aa", leaves=[{"rev": "3-aa", "deleted": True}, {"rev": "3-bb", "deleted": True}])
        self.assertTrue(checker.check([CONVERGED], {"h1": {"d": tombs}}).passed)
        closed = dead("d", "3-aa", leaves=[{"rev": "3-aa", "deleted": True, "closed": True},
                                           {"rev": "3-bb", "deleted": True, "closed": False}])
        self.assertIn("wrong-winner", kinds(checker.check([CONVERGED], {"h1": {"d": closed}})))
        ok = live("d", "2-bb", {"w": "c1-1"}, leaves=[{"rev": "2-bb", "deleted": False},
                                                       {"rev": "9-ff", "deleted": True}])
        self.assertTrue(checker.check(h, {"h1": {"d": ok}}).passed)

    def test_generation_compares_numerically(self):
        self.assertGreater(checker.rev_key("10-aa"), checker.rev_key("9-ff"))


class PlanTests(unittest.TestCase):
    def test_deterministic_covers_kinds_and_respects_groups(self):
        hosts = ["h1", "h2", "h3"]
        a = plan(random.Random("5:nemesis"), list(KINDS), hosts, 60)
        b = plan(random.Random("5:nemesis"), list(KINDS), hosts, 60)
        self.assertEqual([f.describe() for f in a], [f.describe() for f in b])
        self.assertEqual({f.kind for f in a}, set(KINDS))     # every kind at least once
        for f in a:
            self.assertLessEqual(f.end, 60)
            self.assertLess(f.start, f.end)
        for f in a:
            for g in a:
                if f is not g and GROUPS.get(f.kind) and GROUPS.get(f.kind) == GROUPS.get(g.kind) \
                        and f.params["host"] == g.params["host"]:
                    self.assertFalse(f.start < g.end and g.start < f.end, (f.describe(), g.describe()))

    def test_no_faults(self):
        self.assertEqual(plan(random.Random(1), [], ["h1", "h2"], 60), [])


class SweepTests(unittest.TestCase):
    def test_seeds_and_percentiles(self):
        self.assertEqual(parse_seeds("1..3,7"), [1, 2, 3, 7])
        self.assertEqual(percentile([3, 1, 2, 4], 50), 2)
        self.assertEqual(percentile([3, 1, 2, 4], 99), 4)
        self.assertIsNone(percentile([], 50))


if __name__ == "__main__":
    unittest.main()
