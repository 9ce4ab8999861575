"""One line per check (`PASS name` or `FAIL name: evidence`) and the closing
`N passed, N failed` line."""
import sys
import time


class Report:
    def __init__(self):
        self.passed, self.failed = 0, []
        self.t0 = time.monotonic()

    def check(self, name, ok, evidence="", info=""):
        """Records and prints one check (`evidence` is printed when it fails, `info` when it
        passes); returns `ok` so callers can branch on it."""
        if ok:
            self.passed += 1
            print(f"PASS {name}" + (f" ({info})" if info else ""), flush=True)
        else:
            self.failed.append(name)
            print(f"FAIL {name}: {evidence}", flush=True)
        return ok

    def not_run(self, name, reason):
        """A check that could not run because something it needs failed: counted as failed."""
        return self.check(name, False, f"not run: {reason}")

    def note(self, text):
        print(f"  -- {text}", flush=True)

    def section(self, title):
        print(f"== {title} [{time.monotonic() - self.t0:.0f} s]", flush=True)

    def summary(self):
        print(f"{self.passed} passed, {len(self.failed)} failed ({time.monotonic() - self.t0:.0f} s)", flush=True)
        return 1 if self.failed else 0


def sample(items, limit=5):
    """The first `limit` items and how many more there are, for evidence lines."""
    items = list(items)
    head = "; ".join(str(x) for x in items[:limit])
    return head + (f"; … {len(items) - limit} more" if len(items) > limit else "") + f" [{len(items)} in all]"


def by_kind(bad, kind, limit=6):
    """Evidence for [(doc id, text)]: how many of each kind of document (`kind(id)`: design,
    conflict:tie, attachment, …) and one example of each, so a failure names what breaks."""
    if kind is None:
        return sample((t for _, t in bad), 4)
    counts, examples = {}, {}
    for doc_id, text in bad:
        k = kind(doc_id)
        counts[k] = counts.get(k, 0) + 1
        examples.setdefault(k, text)
    head = ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda x: -x[1]))
    return f"{len(bad)} documents ({head}); e.g. " + "; ".join(list(examples.values())[:limit])


if __name__ == "__main__":
    sys.exit("report.py is a module")
