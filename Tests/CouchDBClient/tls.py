"""Scenario `tls`: CouchDB serving https through its own `[ssl]` section (certificates made
here with the openssl CLI: a CA and a server certificate for 127.0.0.1/localhost);
`ferry sync https://…` verified with --ca, pinned with --pin, refused (exit 5, nothing written)
with a wrong pin and with another CA (README.md).

CouchDB reads `[ssl]` at start: the settings go to `rel/etc/local.d/20-ssl.ini` of the test
instance (the tool rewrites only its `10-test.ini`) and CouchDB is restarted on the same port,
data kept. In control mode CouchDB-2's replicator stands in: `[replicator]
verify_ssl_certificates` with `ssl_trusted_certificates_file` is its --ca; it has no pinning,
so the --pin cases are not run there."""
import hashlib
import os
import ssl
import subprocess

from harness import SyncOptions, couch_url, plain_docs, poll
from servers import free_port


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(d):
    """ca.pem/ca.key, server.pem/server.key (signed by the CA, SAN 127.0.0.1 and localhost),
    other-ca.pem (a CA that signed nothing here)."""
    os.makedirs(d, exist_ok=True)
    for name in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem",
                "-days", "2", "-subj", f"/CN=Ferry test {name}", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    with open(os.path.join(d, "server.pem")) as f:
        der = ssl.PEM_cert_to_DER_cert(f.read())
    return hashlib.sha256(der).hexdigest()


def enable_ssl(couchdb, d, port):
    """[ssl] for the test instance, then a restart on its port (data kept)."""
    ini = os.path.join(couchdb.dir, "rel", "etc", "local.d", "20-ssl.ini")
    with open(ini, "w") as f:
        f.write(f"[ssl]\nenable = true\nport = {port}\ncert_file = {d}/server.pem\nkey_file = {d}/server.key\n")
    http_port = couchdb.server.base.rsplit(":", 1)[1]
    subprocess.run([couchdb.tool, "stop", couchdb.dir], capture_output=True, timeout=120)
    p = subprocess.run([couchdb.tool, "start", couchdb.dir, "--port", http_port], capture_output=True, text=True, timeout=180)
    if p.returncode == 0:
        couchdb.set_config("replicator", "startup_jitter", "0")
    return p


def run(report, couch, couchdb, local, control, tmp):
    report.section("TLS: CouchDB's own [ssl] listener")
    d = os.path.join(tmp, "tls")
    pin = make_certs(d)
    port = free_port()
    p = enable_ssl(couchdb, d, port)
    up = p.returncode == 0 and poll("CouchDB answers https", 60, lambda: couch.http.get(
        f"https://127.0.0.1:{port}/_up", verify=os.path.join(d, "ca.pem"), timeout=5).status_code == 200)
    report.check(f"[tls]: CouchDB serves https on port {port} with the test CA's certificate", up,
                 f"{p.stdout[-200:]} {p.stderr[-300:]}")
    if not up:
        return
    plain_docs(couch, "tls-src", 50, prefix="tl")
    # Ferry is given the address (its certificate has an IP SAN); CouchDB's replicator (Erlang's
    # ssl) checks an address only against DNS names, so control mode says `localhost`.
    host = "localhost" if control else "127.0.0.1"
    url = couch_url(couch, "tls-src", base=f"https://{host}:{port}")
    wrong_pin = hashlib.sha256(b"not the certificate").hexdigest()
    cases = [("--ca of another CA", SyncOptions(ca=f"{d}/other-ca.pem", max_attempts=2, timeout=20), 5),
             ("--ca (CA-verified)", SyncOptions(ca=f"{d}/ca.pem", max_attempts=2, timeout=20), 0)]
    if not control:
        cases += [("--pin (pinned)", SyncOptions(pins=[pin], max_attempts=2, timeout=20), 0),
                  ("--pin with colons, as openssl prints it", SyncOptions(
                      pins=[":".join(pin[i:i + 2] for i in range(0, 64, 2)).upper()], max_attempts=2, timeout=20), 0),
                  ("a wrong --pin", SyncOptions(pins=[wrong_pin], max_attempts=2, timeout=20), 5)]
    else:
        report.note("control: CouchDB's replicator has no certificate pinning; the --pin cases need Ferry")
    for k, (name, opts, want) in enumerate(cases):
        label = f"[tls {name}]"
        db = f"tls-{k}"
        local.create(db)
        if control:
            # A fresh CouchDB-2 per case: its replicator's pool reuses (or trips on) the previous
            # case's TLS connection to the same host and port.
            local.restart()
            local.configure(verify_ssl_certificates="true", ssl_trusted_certificates_file=opts.ca)
        r = local.sync(db, url, "pull", opts)
        n = local.count(db)
        if want == 0:
            report.check(f"{label}: sync --pull over https exits 0 and brings the 50 documents", r.rc == 0 and n == 50,
                         f"{r.describe()}; {n} local documents")
        else:
            report.check(f"{label}: sync exits 5 (TLS refused) and writes nothing", r.rc == 5 and n == 0,
                         f"{r.describe()}; {n} local documents")
