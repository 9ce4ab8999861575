// Databases: each one's counts, size, sequence and conflict policy, live (read again every
// two seconds while shown); create (server admins), compact and delete (database admins).
import { get, put, post, del, dbPath, can, session } from './api.js';
import { h, say, show, field, size } from './ui.js';

const POLL_MS = 2000;

export async function databasesPage() {
  const tbody = h('tbody');
  const table = h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'muted' }, 'Databases you can read'),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col', class: 'num' }, 'Documents'),
      h('th', { scope: 'col', class: 'num optional' }, 'Deleted'), h('th', { scope: 'col', class: 'num' }, 'Conflicts'),
      h('th', { scope: 'col', class: 'num optional' }, 'Size'), h('th', { scope: 'col', class: 'num optional' }, 'Update seq'),
      h('th', { scope: 'col', class: 'optional' }, 'Conflict policy'), h('th', { scope: 'col' }, 'Actions'))),
    tbody));
  const nodes = [table];
  if (session.who.serverAdmin) {
    const name = field('New database name', { name: 'dbname', required: true, pattern: '[a-z][a-z0-9_$\\(\\)+\\/\\-]*' });
    const policy = h('select', { name: 'policy' },
      h('option', { value: 'resolve' }, 'resolve (automatic, every peer alike)'), h('option', { value: 'keep' }, 'keep (conflicts wait for a person)'));
    nodes.unshift(h('form', { class: 'inline', onsubmit: async (event) => {
      event.preventDefault();
      try {
        await put(`${dbPath(name.input.value)}?conflict_policy=${policy.value}`);
        say(`Database ${name.input.value} created.`, 'good');
        name.input.value = '';
        await refresh();
      } catch (e) { say(`Could not create the database: ${e.message}`, 'bad'); }
    } }, name.label, h('label', {}, 'Conflict policy', policy), h('button', { type: 'submit' }, 'Create database')));
  }
  show('Databases', ...nodes);

  let timer = null;
  let stopped = false;
  // The rows are only rebuilt when something changed, so focus stays on a control.
  let shown = '';
  async function refresh() {
    const names = await get('/_all_dbs');
    const infos = await Promise.all(names.map((n) => get(dbPath(n)).catch(() => null)));
    const rows = [];
    names.forEach((n, i) => {
      const info = infos[i];
      if (!info) return;
      const actions = h('div', { class: 'actions' });
      if (can(n, 'admin')) {
        actions.append(
          h('button', { type: 'button', class: 'secondary', 'aria-label': `Compact ${n}`, onclick: async () => {
            try { await post(dbPath(n) + '/_compact', {}); say(`Compaction of ${n} started.`, 'good'); } catch (e) { say(e.message, 'bad'); }
          } }, 'Compact'),
          h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${n}`, onclick: async () => {
            if (!window.confirm(`Delete database ${n} and all its documents?`)) return;
            try { await del(dbPath(n)); say(`Database ${n} deleted.`, 'good'); await refresh(); } catch (e) { say(e.message, 'bad'); }
          } }, 'Delete'));
      }
      rows.push(h('tr', { 'data-db': n },
        h('td', {}, h('a', { href: `#/db/${encodeURIComponent(n)}` }, n)),
        h('td', { class: 'num' }, String(info.doc_count)),
        h('td', { class: 'num optional' }, String(info.doc_del_count)),
        h('td', { class: 'num' }, String(info.conflicts ?? '')),
        h('td', { class: 'num optional' }, size(info.sizes ? info.sizes.file : 0)),
        h('td', { class: 'num optional' }, String(info.update_seq)),
        h('td', { class: 'optional' }, info.conflict_policy ?? ''),
        h('td', {}, actions)));
    });
    const seen = JSON.stringify([names, infos, session.who]);
    if (!stopped && seen !== shown) {
      shown = seen;
      tbody.replaceChildren(...rows);
    }
  }
  async function tick() {
    try { await refresh(); } catch (e) { say(`Could not read the databases: ${e.message}`, 'bad'); }
    if (!stopped) timer = setTimeout(tick, POLL_MS);
  }
  await tick();
  return () => { stopped = true; clearTimeout(timer); };
}
