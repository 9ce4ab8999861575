// Tests/Browser/cors.py loads index.html?daemon=URL&db=DB&doc=ID&name=USER&password=PW from an origin
// other than the daemon's. This module talks to the daemon the way a web app would: it logs in with
// POST /_session (JSON), then, with the AuthSession cookie only (credentials: 'include', never an
// Authorization header), creates a document (PUT with a JSON body: a preflighted request), reads it
// back, updates it with its _rev, reads _all_docs, checks that a request without the cookie is
// refused, logs out, and checks the cookie no longer works. Every step is recorded, whatever the
// earlier ones did (a refused step does not stop the rest: the negative cases check that none got
// through). The record ends up in window.ferryResult and in <pre id="result">.
const params = new URLSearchParams(location.search);
const daemon = params.get('daemon');
const db = encodeURIComponent(params.get('db'));
const doc = encodeURIComponent(params.get('doc'));
const name = params.get('name');
const password = params.get('password');
const stepTimeout = Number(params.get('timeout') || 5) * 1000;   // ms a step may take
const steps = [];
window.ferrySteps = steps;   // so far (read when the page does not finish in time)

// One fetch: its status, body (JSON if it parses), the ETag the server exposes, and whether the
// Set-Cookie header leaked to the script (it never should); or the error fetch threw. A fetch that
// has not settled after `stepTimeout` is aborted and recorded as timed out (Chromium leaves a
// credentialed request pending forever when a 401 asks for Basic credentials with WWW-Authenticate:
// it waits for a login dialog that a headless browser never shows).
async function call(step, method, path, { body, credentials = 'include' } = {}) {
  const record = { step, method, path, credentials };
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), stepTimeout);
  const init = { method, credentials, headers: {}, signal: abort.signal };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  try {
    const res = await fetch(daemon + path, init);
    record.status = res.status;
    record.etag = res.headers.get('ETag');
    record.setCookieVisible = res.headers.get('Set-Cookie');
    const text = await res.text();
    try { record.body = JSON.parse(text); } catch { record.body = text; }
  } catch (e) {
    record.error = `${e.name}: ${e.message}`;
    if (abort.signal.aborted) record.timedOut = stepTimeout / 1000;
  }
  clearTimeout(timer);
  steps.push(record);
  return record;
}

const started = performance.now();
await call('login', 'POST', '/_session', { body: { name, password } });
await call('session', 'GET', '/_session');
const created = await call('create', 'PUT', `/${db}/${doc}`,
  { body: { title: 'written by a browser', from: location.origin, n: 1 } });
const read = await call('read', 'GET', `/${db}/${doc}`);
const rev = read.body?._rev ?? created.body?.rev;
await call('update', 'PUT', `/${db}/${doc}`,
  { body: { ...(read.body && typeof read.body === 'object' ? read.body : {}), _rev: rev, n: 2 } });
await call('all_docs', 'GET', `/${db}/_all_docs`);
await call('no_cookie', 'GET', `/${db}/${doc}`, { credentials: 'omit' });
await call('logout', 'DELETE', '/_session');
await call('after_logout', 'GET', `/${db}/${doc}`);

window.ferryResult = {
  origin: location.origin,
  daemon,
  documentCookie: document.cookie,
  ms: Math.round(performance.now() - started),
  steps,
};
document.getElementById('result').textContent = JSON.stringify(window.ferryResult, null, 2);
