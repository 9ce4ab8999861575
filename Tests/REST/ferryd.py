"""Starting a `ferry serve --data` daemon for the REST checks (interop.py, couch_replicate.py)."""
import os
import re
import subprocess


def serve(ferry, data, tmp, label, users=(), args=()):
    """Adds `users` (argument lists for `ferry user add`), starts `ferry serve --data DATA
    --port 0` (and `args`), and returns (process, base URL) once its first stdout line says where it
    listens: the line is read as it is written, no polling."""
    os.makedirs(data, exist_ok=True)
    for user_args in users:
        subprocess.run([ferry, "user", "add", "--data", data, *user_args], check=True, stdout=subprocess.DEVNULL)
    err = open(os.path.join(tmp, f"{label}.err"), "w+")
    proc = subprocess.Popen([ferry, "serve", "--data", data, "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=err, text=True)
    m = re.search(r" at (http://127\.0\.0\.1:\d+)/", proc.stdout.readline())
    if m:
        return proc, m.group(1)
    proc.wait()
    err.seek(0)
    raise SystemExit(f"ferry serve ({label}) did not start: {err.read()}")
