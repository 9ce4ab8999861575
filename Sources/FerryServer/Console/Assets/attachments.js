// A document's attachments: name (a download link), type, size and whether the bytes are on
// this server (a replica may hold an attachment it has not fetched: `/_utils/attachments`);
// writers upload and remove.
import { get, docPath, ApiError } from './api.js';
import { h, say, size } from './ui.js';

const attachmentPath = (db, id, name) => `${docPath(db, id)}/${encodeURIComponent(name)}`;

/** Sends a request with a raw body (a file); throws ApiError unless 2xx. */
async function send(method, path, body, type) {
  const response = await fetch(path, { method, credentials: 'same-origin', body,
    headers: { Accept: 'application/json', ...(type ? { 'Content-Type': type } : {}) } });
  if (!response.ok) {
    let json = null;
    try { json = await response.json(); } catch { json = null; }
    throw new ApiError(response.status, json);
  }
  return response.json();
}

/** The attachments section of document `doc`; `changed` runs after an upload or removal. */
export function attachmentsSection(db, doc, writable, changed) {
  const id = doc._id;
  const entries = Object.entries(doc._attachments || {});
  const states = new Map();
  if (entries.length > 0) {
    get(`/_utils/attachments/${encodeURIComponent(db)}/${encodeURIComponent(id)}`)
      .then((fetched) => { for (const [name, cell] of states) cell.textContent = fetched[name] ? 'here' : 'not fetched'; })
      .catch(() => { for (const cell of states.values()) cell.textContent = 'unknown'; });
  }
  const rows = entries.map(([name, a]) => {
    const state = h('td', {}, 'checking…');
    states.set(name, state);
    const actions = h('td', {});
    if (writable) {
      actions.append(h('button', { type: 'button', class: 'secondary', 'aria-label': `Remove attachment ${name}`, onclick: async () => {
        try {
          await send('DELETE', `${attachmentPath(db, id, name)}?rev=${encodeURIComponent(doc._rev)}`);
          say(`Removed ${name}.`, 'good');
          await changed();
        } catch (e) { say(`Not removed: ${e.message}`, 'bad'); }
      } }, 'Remove'));
    }
    return h('tr', {},
      h('td', {}, h('a', { href: attachmentPath(db, id, name), download: name }, name)),
      h('td', { class: 'optional' }, a.content_type || ''),
      h('td', { class: 'num' }, size(a.length || 0)),
      state, actions);
  });
  const section = h('section', { 'aria-label': 'Attachments' }, h('h2', {}, `Attachments (${entries.length})`));
  if (entries.length > 0) {
    section.append(h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col', class: 'optional' }, 'Type'),
        h('th', { scope: 'col', class: 'num' }, 'Size'), h('th', { scope: 'col' }, 'Bytes'), h('th', { scope: 'col' }, 'Actions'))),
      h('tbody', {}, ...rows))));
  }
  if (writable) {
    const file = h('input', { type: 'file', name: 'attachment' });
    section.append(h('div', { class: 'inline' }, h('label', {}, 'Attachment file', file),
      h('button', { type: 'button', onclick: async () => {
        const f = file.files[0];
        if (!f) { say('Choose a file to upload first.', 'bad'); return; }
        try {
          await send('PUT', `${attachmentPath(db, id, f.name)}?rev=${encodeURIComponent(doc._rev)}`, f, f.type || 'application/octet-stream');
          say(`Uploaded ${f.name} (${size(f.size)}).`, 'good');
          await changed();
        } catch (e) { say(`Not uploaded: ${e.message}`, 'bad'); }
      } }, 'Upload')));
  }
  return section;
}
