// Replications (server admins): every job with its state, a progress bar, documents per
// second and the last error, read again every second (rows are updated in place, so focus
// stays); add one (one-shot, continuous or periodic with a budget; selector, named filter and
// its parameters, document IDs, attachment download rules), pause, resume, remove.
import { get, post, del, session, ApiError } from './api.js';
import { h, say, show, field } from './ui.js';

const POLL_MS = 1000;

/** The peer end of a job: the URL that is not the local database. */
export function peerOf(job) {
  return job.direction === 'pull' ? job.source : (job.target || job.source);
}

function addForm(refresh) {
  const names = Object.keys(session.who.databases).sort();
  const id = field('Replication ID (optional)', { name: 'rid' });
  const database = h('select', { name: 'database', required: true }, ...names.map((n) => h('option', { value: n }, n)));
  const peer = field('Peer database URL', { name: 'peer', required: true, type: 'url', placeholder: 'ws://host:4984/db' });
  const direction = h('select', { name: 'direction' }, ...['both', 'push', 'pull'].map((d) => h('option', { value: d }, d)));
  const mode = h('select', { name: 'mode' }, h('option', { value: 'continuous' }, 'continuous'),
    h('option', { value: 'once' }, 'one-shot'), h('option', { value: 'periodic' }, 'periodic'));
  const every = field('Every (seconds, periodic)', { name: 'every', type: 'number', min: 1, value: 60 });
  const budget = field('Budget (seconds, 0 = until caught up)', { name: 'budget', type: 'number', min: 0, value: 0 });
  const selector = field('Selector (JSON, optional)', { name: 'selector' });
  const filter = field('Filter (name, optional)', { name: 'filter' });
  const params = field('Filter parameters (JSON object, optional)', { name: 'query_params' });
  const docIDs = field('Document IDs (comma-separated, optional)', { name: 'doc_ids' });
  const rules = field('Attachment download rules (JSON array, optional)', { name: 'download' });
  const form = h('form', { class: 'inline', 'aria-label': 'Add a replication', onsubmit: async (event) => {
    event.preventDefault();
    const doc = { database: database.value, peer: peer.input.value, direction: direction.value, continuous: mode.value === 'continuous' };
    if (id.input.value.trim()) doc._id = id.input.value.trim();
    if (mode.value === 'periodic') doc.schedule = { every: Number(every.input.value), budget: Number(budget.input.value) };
    try {
      if (selector.input.value.trim()) doc.selector = JSON.parse(selector.input.value);
      if (params.input.value.trim()) doc.query_params = JSON.parse(params.input.value);
      if (rules.input.value.trim()) doc.download = JSON.parse(rules.input.value);
    } catch (e) {
      say(`Not added: the selector, the filter parameters or the rules are not valid JSON (${e.message}).`, 'bad');
      return;
    }
    if (filter.input.value.trim()) doc.filter = filter.input.value.trim();
    const ids = docIDs.input.value.split(',').map((s) => s.trim()).filter(Boolean);
    if (ids.length) doc.doc_ids = ids;
    try {
      const added = await post('/_replicator', doc);
      say(`Replication ${added.id} added.`, 'good');
      await refresh();
    } catch (e) { say(`Not added: ${e.message}`, 'bad'); }
  } }, id.label, h('label', {}, 'Database', database), peer.label, h('label', {}, 'Direction', direction),
  h('label', {}, 'Mode', mode), every.label, budget.label, selector.label, filter.label, params.label, docIDs.label, rules.label,
  h('button', { type: 'submit' }, 'Add replication'));
  return form;
}

export async function replicationsPage() {
  if (!session.who.serverAdmin) {
    show('Replications', h('p', {}, 'Only server admins see and manage replications.'));
    return () => {};
  }
  const tbody = h('tbody');
  const rows = new Map();      // job id → {row, cells…, last}
  let timer = null;
  let stopped = false;

  function actionsFor(job) {
    const cell = h('div', { class: 'actions' });
    if (job.transient) return cell;
    const paused = job.state === 'paused' || (job.info && job.info.paused);
    const act = async (what, path) => {
      try { await post(path, {}); say(`Replication ${job.doc_id} ${what}.`, 'good'); await refresh(); } catch (e) { say(e.message, 'bad'); }
    };
    cell.append(paused
      ? h('button', { type: 'button', class: 'secondary', 'aria-label': `Resume ${job.doc_id}`, onclick: () => act('resumed', `/_replicator/${encodeURIComponent(job.doc_id)}/_resume`) }, 'Resume')
      : h('button', { type: 'button', class: 'secondary', 'aria-label': `Pause ${job.doc_id}`, onclick: () => act('paused', `/_replicator/${encodeURIComponent(job.doc_id)}/_pause`) }, 'Pause'),
    h('button', { type: 'button', class: 'danger', 'aria-label': `Remove ${job.doc_id}`, onclick: async () => {
      if (!window.confirm(`Remove replication ${job.doc_id}?`)) return;
      try {
        const doc = await get(`/_replicator/${encodeURIComponent(job.doc_id)}`);
        await del(`/_replicator/${encodeURIComponent(job.doc_id)}?rev=${encodeURIComponent(doc._rev)}`);
        say(`Replication ${job.doc_id} removed.`, 'good');
        await refresh();
      } catch (e) { say(e.message, 'bad'); }
    } }, 'Remove'));
    return cell;
  }

  function update(job, now) {
    let r = rows.get(job.id);
    if (!r) {
      r = { state: h('td', {}), progress: h('progress', { 'aria-label': `Progress of ${job.doc_id || job.id}` }), count: h('span', { class: 'muted' }),
        rate: h('td', { class: 'num' }), error: h('td', { class: 'optional error' }), actions: h('td', {}), last: null, paused: null };
      r.row = h('tr', { 'data-job': job.doc_id || job.id },
        h('td', {}, job.doc_id || job.id), h('td', {}, job.database || ''), h('td', { class: 'optional' }, h('code', {}, peerOf(job) || '')),
        h('td', { class: 'optional' }, `${job.direction}${job.continuous ? ', continuous' : ''}${job.schedule ? `, every ${job.schedule.every} s` : ''}`),
        r.state, h('td', {}, r.progress, ' ', r.count), r.rate, r.error, r.actions);
      rows.set(job.id, r);
    }
    const info = job.info || {};
    r.state.textContent = job.state + (info.activity ? ` (${info.activity})` : '');
    r.state.className = `state-${job.state}`;
    const p = info.progress;
    if (p && p.total > 0) { r.progress.max = p.total; r.progress.value = Math.min(p.completed, p.total); } else if (job.state === 'completed' || info.activity === 'idle') { r.progress.max = 1; r.progress.value = 1; } else { r.progress.removeAttribute('value'); }
    r.count.textContent = p ? `${p.completed}/${p.total}` : '';
    const moved = (info.docs_pushed || 0) + (info.docs_pulled || 0);
    if (r.last) {
      const seconds = (now - r.last.at) / 1000;
      if (seconds > 0) r.rate.textContent = `${Math.round((moved - r.last.moved) / seconds)}`;
    }
    r.last = { at: now, moved };
    r.error.textContent = info.error || '';
    const paused = job.state === 'paused' || Boolean(info.paused);
    if (r.paused !== paused) { r.actions.replaceChildren(actionsFor(job)); r.paused = paused; }
  }

  async function refresh() {
    const jobs = (await get('/_scheduler/jobs')).jobs;
    if (stopped) return;
    const now = performance.now();
    const seen = new Set();
    for (const job of jobs) { update(job, now); seen.add(job.id); }
    for (const [id, r] of rows) if (!seen.has(id)) { r.row.remove(); rows.delete(id); }
    const order = jobs.map((j) => rows.get(j.id).row);
    if (order.some((row, i) => tbody.children[i] !== row)) tbody.replaceChildren(...order);
  }
  async function tick() {
    try { await refresh(); } catch (e) { if (!(e instanceof ApiError && e.status === 401)) say(`Could not read the replications: ${e.message}`, 'bad'); }
    if (!stopped) timer = setTimeout(tick, POLL_MS);
  }
  show('Replications', addForm(refresh), h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'muted' }, 'Replications of this peer'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'ID'), h('th', { scope: 'col' }, 'Database'), h('th', { scope: 'col', class: 'optional' }, 'Peer'),
      h('th', { scope: 'col', class: 'optional' }, 'Kind'), h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, 'Progress'),
      h('th', { scope: 'col', class: 'num' }, 'Docs/s'), h('th', { scope: 'col', class: 'optional' }, 'Last error'), h('th', { scope: 'col' }, 'Actions'))),
    tbody)));
  await tick();
  return () => { stopped = true; clearTimeout(timer); };
}
