// A document's revision tree, drawn (winner, leaves, tombstones, closed branches), and its
// conflict view: the live leaves side by side, each one's differences from the winner, "keep
// this one" and a merge.
import { get, put, del, docPath } from './api.js';
import { h, say, svg } from './ui.js';

/** The document's leaves: `{rev, deleted, body, history}` (history newest first). */
export async function leaves(db, id) {
  const answers = await get(`${docPath(db, id)}?open_revs=all&revs=true`);
  return answers.filter((a) => a.ok).map((a) => {
    const d = a.ok;
    const history = d._revisions ? d._revisions.ids.map((digest, i) => `${d._revisions.start - i}-${digest}`) : [d._rev];
    return { rev: d._rev, deleted: Boolean(d._deleted), body: d, history };
  });
}

const short = (rev) => rev.slice(0, rev.indexOf('-') + 7);

/** The tree as an SVG: one row per leaf, a column per generation. */
export function treeGraph(all, winner) {
  const rows = new Map();      // rev → row
  const parent = new Map();
  all.forEach((leaf, row) => {
    leaf.history.forEach((rev, i) => {
      if (!rows.has(rev)) rows.set(rev, row);
      if (i + 1 < leaf.history.length) parent.set(rev, leaf.history[i + 1]);
    });
  });
  const generation = (rev) => parseInt(rev, 10);
  const revs = [...rows.keys()];
  const lowest = Math.min(...revs.map(generation));
  const x = (rev) => 40 + (generation(rev) - lowest) * 110;
  const y = (rev) => 30 + rows.get(rev) * 50;
  const width = Math.max(...revs.map(x)) + 90;
  const height = 30 + all.length * 50;
  const leafOf = new Map(all.map((l) => [l.rev, l]));
  const closed = new Set();    // the revisions of branches that end in a tombstone
  for (const l of all) if (l.deleted && l.rev !== winner) l.history.forEach((r) => closed.add(r));
  const live = all.filter((l) => !l.deleted).length;
  const graph = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', class: 'revtree',
    'aria-label': `Revision tree: ${revs.length} revisions, ${all.length} leaves (${live} live), winner ${winner}` });
  for (const [child, p] of parent) {
    if (!rows.has(p)) continue;
    graph.append(svg('line', { x1: x(p), y1: y(p), x2: x(child), y2: y(child), class: closed.has(child) && rows.get(child) !== rows.get(p) ? 'edge closed' : 'edge' }));
  }
  for (const rev of revs) {
    const leaf = leafOf.get(rev);
    const kind = rev === winner ? 'node winner' : leaf ? (leaf.deleted ? 'node tombstone' : 'node leaf') : 'node';
    graph.append(svg('g', { class: kind },
      svg('title', {}, `${rev}${rev === winner ? ' (winner)' : ''}${leaf ? (leaf.deleted ? ' (tombstone)' : ' (leaf)') : ''}`),
      svg('circle', { cx: x(rev), cy: y(rev), r: 9 }),
      svg('text', { x: x(rev), y: y(rev) + 24, 'text-anchor': 'middle' }, short(rev))));
  }
  return h('figure', { class: 'revtree-wrap' }, graph,
    h('figcaption', { class: 'muted' }, 'Filled: the winner; ringed: other live leaves; dashed red: tombstones; dashed edges: closed branches.'));
}

/** Line differences of `b` from `a` (LCS), as [[' '|'-'|'+', line]]. */
export function lineDiff(a, b) {
  const x = a.split('\n'), y = b.split('\n');
  const n = x.length, m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) {
    lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([' ', x[i]]); i++; j++; } else if (lcs[i + 1][j] >= lcs[i][j + 1]) { out.push(['-', x[i++]]); } else { out.push(['+', y[j++]]); }
  }
  while (i < n) out.push(['-', x[i++]]);
  while (j < m) out.push(['+', y[j++]]);
  return out;
}

const bodyText = (body) => {
  const copy = { ...body };
  for (const k of ['_rev', '_revisions', '_conflicts']) delete copy[k];
  return JSON.stringify(copy, null, 2);
};

/** Deletes every live leaf but `keep`. */
async function deleteOthers(db, id, all, keep) {
  for (const leaf of all) {
    if (leaf.deleted || leaf.rev === keep) continue;
    await del(`${docPath(db, id)}?rev=${encodeURIComponent(leaf.rev)}`);
  }
}

/** The conflict view of `all` (more than one live leaf); `done` runs after a resolution. */
export function conflictView(db, id, all, winner, writable, done) {
  const live = all.filter((l) => !l.deleted);
  const winning = live.find((l) => l.rev === winner) || live[0];
  const cards = live.map((leaf) => {
    const card = h('section', { class: 'leaf', 'aria-label': `Revision ${leaf.rev}` },
      h('h3', {}, `${short(leaf.rev)}${leaf.rev === winner ? ' (current winner)' : ' (conflict)'}`),
      h('pre', { class: 'json' }, bodyText(leaf.body)));
    if (leaf !== winning) {
      const diff = lineDiff(bodyText(winning.body), bodyText(leaf.body)).filter(([k]) => k !== ' ');
      card.append(h('p', { class: 'muted' }, `Differences from the winner (${diff.length} lines):`),
        h('pre', { class: 'diff' }, ...diff.map(([k, line]) => h('span', { class: k === '+' ? 'add' : 'del' }, `${k} ${line}\n`))));
    }
    if (writable) {
      card.append(h('button', { type: 'button', 'aria-label': `Keep revision ${leaf.rev}`, onclick: async () => {
        try {
          await deleteOthers(db, id, all, leaf.rev);
          say(`Kept ${leaf.rev}; the other branches are closed.`, 'good');
          await done();
        } catch (e) { say(`Not resolved: ${e.message}`, 'bad'); }
      } }, 'Keep this one'));
    }
    return card;
  });
  const section = h('section', { class: 'conflicts', 'aria-label': 'Conflict' },
    h('h2', {}, `Conflict: ${live.length} live revisions`), h('div', { class: 'leaves' }, ...cards));
  if (writable) {
    const merged = h('textarea', { class: 'json', name: 'merged', spellcheck: false });
    merged.value = bodyText(winning.body);
    section.append(h('h3', {}, 'Merge'),
      h('label', {}, 'Merged document (JSON): saved on the winner, the other branches closed', merged),
      h('div', { class: 'actions' }, h('button', { type: 'button', onclick: async () => {
        let body;
        try { body = JSON.parse(merged.value); } catch (e) { say(`Not merged: not valid JSON (${e.message}).`, 'bad'); return; }
        try {
          await put(docPath(db, id), { ...body, _id: id, _rev: winning.rev });
          await deleteOthers(db, id, all, winning.rev);
          say('Merged; the other branches are closed.', 'good');
          await done();
        } catch (e) { say(`Not merged: ${e.message}`, 'bad'); }
      } }, 'Save merge')));
  }
  return section;
}
