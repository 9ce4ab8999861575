// Building the page: elements from data (text is never parsed as HTML), the status line.

/** An element: `attrs` are properties (`on…` a listener), children are nodes or text. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key in el && !key.includes('-')) el[key] = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';

/** An SVG element: `attrs` are attributes, children are nodes or text. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, value);
  for (const child of children) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}

/** Whether the next page keeps the status line (it reports what led there). */
let carry = false;

/** Keeps the status line through the next page change (a save that opens the saved document). */
export function keepStatus() { carry = true; }

/** Clears the status line for a new page, unless `keepStatus` asked to keep it. */
export function newPage() {
  if (carry) carry = false;
  else say('');
}

/** Says `message` in the status line (read out by screen readers); `kind`: 'bad' or 'good'. */
export function say(message, kind = '') {
  const status = document.getElementById('status');
  status.textContent = message;
  status.className = 'status' + (kind ? ' ' + kind : '');
}

/** Replaces the main area with `nodes` and moves focus there (a new page for assistive tech). */
export function show(title, ...nodes) {
  const main = document.getElementById('main');
  main.replaceChildren(h('h1', {}, title), ...nodes);
  document.title = `${title} · Ferry console`;
}

/** A labelled input: the label names it in the accessibility tree. */
export function field(label, attrs = {}) {
  const input = h(attrs.multiline ? 'textarea' : 'input', { ...attrs, multiline: undefined });
  return { label: h('label', {}, label, input), input };
}

/** Bytes as KiB/MiB. */
export function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
