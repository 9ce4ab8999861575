// The console's requests: the server's own REST API, with the session cookie only.

/** A refused request: the HTTP status and CouchDB's `error` and `reason`. */
export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.reason || body.error)) || `HTTP ${status}`);
    this.status = status;
    this.error = body && body.error;
  }
}

/** Sends one request; answers the JSON body, throws ApiError for any status but 2xx. */
export async function request(method, path, body, options = {}) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' }, signal: options.signal };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { json = null; }
  if (!response.ok) throw new ApiError(response.status, json);
  return json;
}

export const get = (path, options) => request('GET', path, undefined, options);
export const put = (path, body) => request('PUT', path, body);
export const post = (path, body) => request('POST', path, body);
export const del = (path) => request('DELETE', path);

/** `/db`, the name escaped. */
export const dbPath = (db) => '/' + encodeURIComponent(db);

/** `/db/id`: a design document's `_design/` stays a path segment, as CouchDB routes it. */
export function docPath(db, id) {
  if (id.startsWith('_design/')) return dbPath(db) + '/_design/' + encodeURIComponent(id.slice(8));
  return dbPath(db) + '/' + encodeURIComponent(id);
}

/** The logged-in user, `{name, serverAdmin, databases: {name: role}}` (null before login). */
export const session = { who: null };

/** Whether the user's role on `db` is at least `role` (reader < writer < admin). */
export function can(db, role) {
  const order = { reader: 1, writer: 2, admin: 3 };
  if (session.who && session.who.serverAdmin) return true;
  const have = session.who && session.who.databases[db];
  return Boolean(have) && order[have] >= order[role];
}

/** Who is logged in and their role on each database (`/_utils/access`); null when nobody. */
export async function access() {
  const who = await get('/_utils/access');
  return who.authenticated ? who : null;
}
