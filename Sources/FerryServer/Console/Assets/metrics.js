// Metrics (server admins): `/_metrics` sampled every two seconds, the last five minutes drawn as
// small charts — requests, replicated revisions, conflicts and open connections. The samples
// are kept while the console is open, across pages.
import { session, ApiError } from './api.js';
import { h, say, show, svg } from './ui.js';

const EVERY_MS = 2000;
const KEEP = 150;            // five minutes of samples
const samples = [];          // {at, requests, revisions, conflicts, connections}

/** Sums of the Prometheus text's series whose names are given. */
export function parseMetrics(text) {
  const sums = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/);
    if (m) sums[m[1]] = (sums[m[1]] || 0) + Number(m[3]);
  }
  return sums;
}

async function sample() {
  const response = await fetch('/_metrics', { credentials: 'same-origin' });
  if (!response.ok) throw new ApiError(response.status, null);
  const m = parseMetrics(await response.text());
  samples.push({ at: performance.now(), requests: m.ferry_http_requests_total || 0,
    revisions: (m.ferry_blip_revisions_received_total || 0) + (m.ferry_blip_revisions_sent_total || 0),
    conflicts: m.ferry_database_conflicts || 0, connections: m.ferry_open_connections || 0 });
  while (samples.length > KEEP) samples.shift();
}

/** Per-second rates of counter `key` between samples, or the gauge's values. */
function series(key, rate) {
  if (!rate) return samples.map((s) => s[key]);
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const seconds = (samples[i].at - samples[i - 1].at) / 1000;
    out.push(seconds > 0 ? Math.max(0, (samples[i][key] - samples[i - 1][key]) / seconds) : 0);
  }
  return out;
}

function chart(title, unit, values) {
  const width = 300, height = 80;
  const max = Math.max(1, ...values);
  const last = values.length ? values[values.length - 1] : 0;
  const points = values.map((v, i) => `${(i / Math.max(1, KEEP - 1)) * width},${height - (v / max) * (height - 4) - 2}`).join(' ');
  const graph = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', class: 'spark',
    'aria-label': `${title}: now ${last.toFixed(1)} ${unit}, at most ${max.toFixed(1)} over the last ${values.length} samples` },
  svg('polyline', { points }));
  return h('figure', { class: 'chart' }, h('figcaption', {}, `${title}: ${last.toFixed(1)} ${unit}`), graph);
}

export async function metricsPage() {
  if (!session.who.serverAdmin) {
    show('Metrics', h('p', {}, 'Only server admins see the metrics.'));
    return () => {};
  }
  const grid = h('div', { class: 'charts' });
  show('Metrics', h('p', { class: 'muted' }, 'The last five minutes, sampled every two seconds while the console is open.'), grid);
  let timer = null;
  let stopped = false;
  async function tick() {
    try {
      await sample();
      if (!stopped) grid.replaceChildren(
        chart('Requests', 'per second', series('requests', true)),
        chart('Revisions replicated', 'per second', series('revisions', true)),
        chart('Conflicts', 'documents', series('conflicts', false)),
        chart('Open connections', '', series('connections', false)));
    } catch (e) { say(`Could not read the metrics: ${e.message}`, 'bad'); }
    if (!stopped) timer = setTimeout(tick, EVERY_MS);
  }
  await tick();
  return () => { stopped = true; clearTimeout(timer); };
}
