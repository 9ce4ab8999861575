// Documents of one database: a page of IDs (by ID, or a Mango selector's matches), live as the
// database changes; and one document as JSON, to edit (writers) or to read.
import { get, put, post, del, dbPath, docPath, can, ApiError } from './api.js';
import { h, say, show, field, keepStatus } from './ui.js';
import { attachmentsSection } from './attachments.js';
import { leaves, treeGraph, conflictView } from './revisions.js';
import { securitySection } from './users.js';

const PAGE = 20;

/** Follows the database's `_changes` (long polls) and calls `changed` after each change. */
function follow(db, changed) {
  const abort = new AbortController();
  (async () => {
    let since = 'now';
    while (!abort.signal.aborted) {
      try {
        const feed = await get(`${dbPath(db)}/_changes?feed=longpoll&timeout=25000&since=${encodeURIComponent(since)}`,
          { signal: abort.signal });
        since = feed.last_seq;
        if (feed.results.length > 0 && !abort.signal.aborted) await changed();
      } catch (e) {
        if (abort.signal.aborted) return;
        await new Promise((resolve) => setTimeout(resolve, 2000));
      }
    }
  })();
  return () => abort.abort();
}

export async function documentsPage(db) {
  const filter = field('Mango selector (JSON), empty for all', { name: 'selector', placeholder: '{"type": "note"}' });
  const tbody = h('tbody');
  const position = h('span', { class: 'muted' });
  const previous = h('button', { type: 'button', class: 'secondary', disabled: true }, 'Previous page');
  const next = h('button', { type: 'button', class: 'secondary', disabled: true }, 'Next page');
  // Each page's start: an `_all_docs` start key, or a `_find` bookmark.
  let starts = [null];
  let nextStart = null;
  let selector = null;

  async function load() {
    const start = starts[starts.length - 1];
    let rows;
    if (selector) {
      const found = await post(`${dbPath(db)}/_find`, { selector, limit: PAGE, fields: ['_id', '_rev'], ...(start ? { bookmark: start } : {}) });
      rows = found.docs.map((d) => ({ id: d._id, rev: d._rev }));
      nextStart = rows.length === PAGE ? found.bookmark : null;
    } else {
      const q = `limit=${PAGE + 1}` + (start ? `&startkey=${encodeURIComponent(JSON.stringify(start))}` : '');
      const all = await get(`${dbPath(db)}/_all_docs?${q}`);
      rows = all.rows.slice(0, PAGE).map((r) => ({ id: r.id, rev: r.value.rev }));
      nextStart = all.rows.length > PAGE ? all.rows[PAGE].id : null;
    }
    tbody.replaceChildren(...rows.map((r) => h('tr', {},
      h('td', {}, h('a', { href: `#/db/${encodeURIComponent(db)}/doc/${encodeURIComponent(r.id)}` }, r.id)),
      h('td', { class: 'optional' }, h('code', {}, r.rev)))));
    if (rows.length === 0) tbody.replaceChildren(h('tr', {}, h('td', { colSpan: 2, class: 'muted' }, 'No documents.')));
    position.textContent = `Page ${starts.length}`;
    previous.disabled = starts.length === 1;
    next.disabled = nextStart === null;
  }

  previous.addEventListener('click', async () => { starts.pop(); await load(); });
  next.addEventListener('click', async () => { starts.push(nextStart); await load(); });
  const filterForm = h('form', { class: 'inline', onsubmit: async (event) => {
    event.preventDefault();
    const text = filter.input.value.trim();
    try {
      selector = text ? JSON.parse(text) : null;
    } catch (e) {
      say(`The selector is not valid JSON: ${e.message}`, 'bad');
      return;
    }
    starts = [null];
    try { await load(); say(''); } catch (e) { say(`Query refused: ${e.message}`, 'bad'); }
  } }, filter.label, h('button', { type: 'submit' }, 'Filter'));

  const header = [h('p', {}, h('a', { href: '#/' }, 'All databases'))];
  if (can(db, 'writer')) header.push(h('p', {}, h('a', { href: `#/db/${encodeURIComponent(db)}/new` }, 'New document')));
  if (can(db, 'admin')) header.push(await securitySection(db));
  show(`Documents in ${db}`, ...header, filterForm,
    h('div', { class: 'table-wrap' }, h('table', {},
      h('caption', { class: 'muted' }, `Documents of ${db}, by ID`),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'ID'), h('th', { scope: 'col', class: 'optional' }, 'Revision'))),
      tbody)),
    h('nav', { class: 'pager', 'aria-label': 'Pages' }, previous, position, next));
  await load();
  // For the first-paint measure (Tests/Browser/console.py reads it through the Performance API).
  performance.mark('ferry-documents-shown');
  return follow(db, () => load().catch(() => {}));
}

/** Shows the current page again (after a save, an upload, a resolution). */
const rerender = async () => {
  keepStatus();
  window.dispatchEvent(new HashChangeEvent('hashchange'));
};

/** One document (`id` null: a new one) as JSON, its attachments, its revision tree and any
 * conflict; writers may save, delete, upload and resolve. */
export async function documentPage(db, id) {
  const writable = can(db, 'writer');
  const doc = id === null ? {} : await get(docPath(db, id) + '?conflicts=true');
  const editor = field(id === null ? 'New document (JSON; give an _id or one is made)' : `Document ${id} (JSON)`,
    { multiline: true, class: 'json', name: 'json', spellcheck: false, readOnly: !writable });
  editor.input.value = JSON.stringify(doc, null, 2);
  const info = h('p', { class: 'muted' });
  const describe = () => {
    info.textContent = doc._rev ? `Revision ${doc._rev}` + (doc._conflicts ? ` · ${doc._conflicts.length} conflicting revision(s)` : '') : '';
  };
  describe();
  const controls = h('div', { class: 'actions' });
  if (writable) {
    controls.append(h('button', { type: 'button', onclick: async () => {
      let body;
      try {
        body = JSON.parse(editor.input.value);
      } catch (e) {
        say(`Not saved: the document is not valid JSON (${e.message}).`, 'bad');
        editor.input.focus();
        return;
      }
      if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        say('Not saved: a document is a JSON object.', 'bad');
        return;
      }
      try {
        const saved = body._id ? await put(docPath(db, body._id), body) : await post(dbPath(db), body);
        say(`Saved ${saved.id} as revision ${saved.rev}.`, 'good');
        keepStatus();
        if (id === null) location.hash = `#/db/${encodeURIComponent(db)}/doc/${encodeURIComponent(saved.id)}`;
        else window.dispatchEvent(new HashChangeEvent('hashchange'));
      } catch (e) {
        if (e instanceof ApiError && e.status === 409) {
          say('Not saved: this document was changed since you opened it (your revision is stale). Reload it to see the current version, then edit again.', 'bad');
        } else {
          say(`Not saved: ${e.message}`, 'bad');
        }
      }
    } }, 'Save'));
    if (id !== null) {
      controls.append(h('button', { type: 'button', class: 'secondary', onclick: async () => {
        await rerender();
        say('Reloaded the current revision.');
      } }, 'Reload'), h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!window.confirm(`Delete document ${id}?`)) return;
        try {
          await del(`${docPath(db, id)}?rev=${encodeURIComponent(doc._rev)}`);
          say(`Deleted ${id}.`, 'good');
          keepStatus();
          location.hash = `#/db/${encodeURIComponent(db)}`;
        } catch (e) {
          say(e instanceof ApiError && e.status === 409 ? 'Not deleted: the document changed since you opened it. Reload it first.' : `Not deleted: ${e.message}`, 'bad');
        }
      } }, 'Delete'));
    }
  }
  const more = [];
  if (id !== null) {
    more.push(attachmentsSection(db, doc, writable, rerender));
    const all = await leaves(db, id);
    if (all.filter((l) => !l.deleted).length > 1) more.push(conflictView(db, id, all, doc._rev, writable, rerender));
    more.push(h('section', { 'aria-label': 'Revision tree' }, h('h2', {}, 'Revision tree'), treeGraph(all, doc._rev)));
  }
  show(id === null ? `New document in ${db}` : id,
    h('p', {}, h('a', { href: `#/db/${encodeURIComponent(db)}` }, `Documents in ${db}`)), info, editor.label, controls, ...more);
  return () => {};
}
