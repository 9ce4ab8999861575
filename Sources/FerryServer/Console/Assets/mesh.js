// The mesh (server admins): this peer, the peers it discovered or was given (trusted or not,
// and why), and the replications between them as a graph — each link coloured by its jobs'
// state, with their lag — read again every second. Peers' own consoles are linked.
import { get, session, ApiError } from './api.js';
import { h, say, show, svg } from './ui.js';
import { peerOf } from './replications.js';

const POLL_MS = 1000;
/** Whether job `job` replicates with peer `p` (its peer URL names one of p's addresses and its port). */
function jobWith(job, p) {
  try {
    const url = new URL(peerOf(job));
    const port = Number(url.port || (url.protocol === 'https:' || url.protocol === 'wss:' ? 443 : 80));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    return port === p.port && (p.addresses || []).concat([p.host]).includes(host);
  } catch { return false; }
}

/** A link's health from its jobs: 'bad' (crashing, failed, offline), 'paused', 'wait', 'ok'. */
function health(jobs) {
  if (jobs.length === 0) return 'none';
  if (jobs.some((j) => ['crashing', 'failed'].includes(j.state) || (j.info && j.info.activity === 'offline'))) return 'bad';
  if (jobs.every((j) => j.state === 'paused')) return 'paused';
  if (jobs.some((j) => ['pending', 'initializing'].includes(j.state) || (j.info && j.info.activity === 'connecting'))) return 'wait';
  return 'ok';
}

const words = { ok: 'replicating', bad: 'broken', paused: 'paused', wait: 'starting', none: 'no replication' };

function consoleURL(p) {
  const host = (p.host || '').includes(':') ? `[${p.host}]` : p.host;
  return `${p.tls ? 'https' : 'http'}://${host}:${p.port}/_utils/`;
}

export async function meshPage() {
  if (!session.who.serverAdmin) {
    show('Mesh', h('p', {}, 'Only server admins see the mesh.'));
    return () => {};
  }
  const figure = h('figure', { class: 'mesh-wrap' });
  const tbody = h('tbody');
  show('Mesh', figure, h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'muted' }, 'Peers this one knows'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Peer'), h('th', { scope: 'col', class: 'optional' }, 'Address'),
      h('th', { scope: 'col' }, 'Trusted'), h('th', { scope: 'col' }, 'Link'), h('th', { scope: 'col', class: 'num' }, 'Lag'),
      h('th', { scope: 'col', class: 'optional' }, 'Databases replicated'))),
    tbody)));
  let timer = null;
  let stopped = false;
  let shown = '';

  async function refresh() {
    let discovery;
    try {
      discovery = await get('/_discovery');
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
      discovery = { self: { name: 'this peer' }, peers: [] };
    }
    const jobs = (await get('/_scheduler/jobs')).jobs;
    if (stopped) return;
    const self = discovery.self.name || 'this peer';
    const peers = discovery.peers.map((p) => {
      const mine = jobs.filter((j) => jobWith(j, p));
      const lag = mine.reduce((n, j) => n + ((j.info && j.info.changes_pending) || 0), 0);
      return { p, jobs: mine, state: health(mine), lag };
    });
    const signature = JSON.stringify(peers.map((x) => [x.p.name, x.p.trusted, x.p.reason, x.state, x.lag, x.p.replicating,
      x.jobs.map((j) => j.database)]));
    if (signature === shown) return;
    shown = signature;
    const size = 360, cx = size / 2, cy = size / 2, radius = 130;
    const graph = svg('svg', { viewBox: `0 0 ${size} ${size}`, width: size, height: size, role: 'img', class: 'mesh',
      'aria-label': `Mesh: ${self} and ${peers.length} peers; ` +
        peers.map((x) => `${x.p.name} ${words[x.state]}${x.lag ? `, lag ${x.lag}` : ''}`).join('; ') });
    peers.forEach((x, i) => {
      const angle = (2 * Math.PI * i) / Math.max(peers.length, 1) - Math.PI / 2;
      x.x = cx + radius * Math.cos(angle);
      x.y = cy + radius * Math.sin(angle);
      if (x.state !== 'none') graph.append(svg('line', { x1: cx, y1: cy, x2: x.x, y2: x.y, class: `link ${x.state}`, 'data-peer': x.p.name }));
    });
    graph.append(svg('g', { class: 'peer self' }, svg('circle', { cx, cy, r: 16 }), svg('text', { x: cx, y: cy + 32, 'text-anchor': 'middle' }, self)));
    for (const x of peers) {
      graph.append(svg('g', { class: `peer ${x.p.trusted ? 'trusted' : 'untrusted'}` }, svg('circle', { cx: x.x, cy: x.y, r: 12 }),
        svg('text', { x: x.x, y: x.y + 26, 'text-anchor': 'middle' }, x.p.name)));
    }
    figure.replaceChildren(graph, h('figcaption', { class: 'muted' },
      'Green: replicating; amber: starting; red: broken (the peer is unreachable or refusing); grey: paused.'));
    tbody.replaceChildren(...peers.map((x) => h('tr', { 'data-peer': x.p.name },
      h('td', {}, h('a', { href: consoleURL(x.p) }, x.p.name)),
      h('td', { class: 'optional' }, `${x.p.host}:${x.p.port}`),
      h('td', {}, x.p.trusted ? 'yes' : `no: ${x.p.reason || 'unknown'}`),
      h('td', { class: `link-${x.state}` }, words[x.state]),
      h('td', { class: 'num' }, String(x.lag)),
      h('td', { class: 'optional' }, [...new Set([...(x.p.replicating || []), ...x.jobs.map((j) => j.database)])].sort().join(', ')))));
    if (peers.length === 0) tbody.replaceChildren(h('tr', {}, h('td', { colSpan: 6, class: 'muted' }, 'No peers known: start with --discover GROUP or --peer URL.')));
  }
  async function tick() {
    try { await refresh(); } catch (e) { say(`Could not read the mesh: ${e.message}`, 'bad'); }
    if (!stopped) timer = setTimeout(tick, POLL_MS);
  }
  await tick();
  return () => { stopped = true; clearTimeout(timer); };
}
