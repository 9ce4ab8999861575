// Users (server admins): the users of `/_users` with their CouchDB roles (which `_security`
// objects grant access by) and their per-database Ferry roles (`ferry user add --role`, shown
// from `/_utils/users`: they are not part of the `/_users` documents); add one, set a password,
// remove.
import { get, put, del, session } from './api.js';
import { h, say, show, field } from './ui.js';

const userPath = (name) => `/_users/${encodeURIComponent(`org.couchdb.user:${name}`)}`;
const rolesOf = (text) => text.split(',').map((s) => s.trim()).filter(Boolean);

export async function usersPage() {
  if (!session.who.serverAdmin) {
    show('Users', h('p', {}, 'Only server admins manage users.'));
    return () => {};
  }
  const tbody = h('tbody');
  async function refresh() {
    const rows = (await get('/_users/_all_docs')).rows;
    const docs = await Promise.all(rows.map((r) => get(`/_users/${encodeURIComponent(r.id)}`)));
    const databaseRoles = await get('/_utils/users');
    tbody.replaceChildren(...docs.map((u) => {
      const password = h('input', { type: 'password', name: `password-${u.name}`, autocomplete: 'new-password' });
      return h('tr', { 'data-user': u.name },
        h('td', {}, u.name), h('td', {}, (u.roles || []).join(', ') || '—'),
        h('td', { class: 'optional' }, Object.entries(databaseRoles[u.name] || {}).map(([db, role]) => `${db}: ${role}`).join(', ') || '—'),
        h('td', {}, h('div', { class: 'actions' },
          h('label', {}, `New password for ${u.name}`, password),
          h('button', { type: 'button', class: 'secondary', 'aria-label': `Set the password of ${u.name}`, onclick: async () => {
            if (!password.value) { say('Type the new password first.', 'bad'); return; }
            try {
              const current = await get(userPath(u.name));
              await put(userPath(u.name), { _rev: current._rev, name: u.name, type: 'user', roles: current.roles || [], password: password.value });
              say(`Password of ${u.name} changed.`, 'good');
              password.value = '';
            } catch (e) { say(`Not changed: ${e.message}`, 'bad'); }
          } }, 'Set password'),
          h('button', { type: 'button', class: 'danger', 'aria-label': `Remove user ${u.name}`, onclick: async () => {
            if (!window.confirm(`Remove user ${u.name}? Their sessions end.`)) return;
            try { await del(`${userPath(u.name)}?rev=${encodeURIComponent(u._rev)}`); say(`User ${u.name} removed.`, 'good'); await refresh(); } catch (e) { say(e.message, 'bad'); }
          } }, 'Remove'))));
    }));
  }
  const name = field('User name', { name: 'username', required: true, autocomplete: 'off', pattern: '[A-Za-z0-9._@\\-]+' });
  const password = field('Password', { name: 'newpassword', type: 'password', required: true, autocomplete: 'new-password' });
  const roles = field('Roles (comma-separated, optional)', { name: 'roles' });
  const form = h('form', { class: 'inline', 'aria-label': 'Add a user', onsubmit: async (event) => {
    event.preventDefault();
    const n = name.input.value;
    try {
      await put(userPath(n), { name: n, type: 'user', roles: rolesOf(roles.input.value), password: password.input.value });
      say(`User ${n} added.`, 'good');
      name.input.value = password.input.value = roles.input.value = '';
      await refresh();
    } catch (e) { say(`Not added: ${e.message}`, 'bad'); }
  } }, name.label, password.label, roles.label, h('button', { type: 'submit' }, 'Add user'));
  show('Users', form, h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'muted' }, 'Users (their CouchDB roles; a database\'s security object grants access by name or role)'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Roles'),
      h('th', { scope: 'col', class: 'optional' }, 'Database roles (ferry user add --role)'), h('th', { scope: 'col' }, 'Actions'))),
    tbody)));
  await refresh();
  return () => {};
}

/** A database's security object (`_security`), for its admins to read and change. */
export async function securitySection(db) {
  const text = h('textarea', { class: 'json', name: 'security', spellcheck: false });
  text.value = JSON.stringify(await get(`/${encodeURIComponent(db)}/_security`), null, 2);
  return h('details', { class: 'security' }, h('summary', {}, 'Security (who may read and write this database)'),
    h('label', {}, 'Security object (JSON: admins and members, each with names and roles)', text),
    h('div', { class: 'actions' }, h('button', { type: 'button', onclick: async () => {
      let body;
      try { body = JSON.parse(text.value); } catch (e) { say(`Not saved: not valid JSON (${e.message}).`, 'bad'); return; }
      try { await put(`/${encodeURIComponent(db)}/_security`, body); say(`Security of ${db} saved.`, 'good'); } catch (e) { say(`Not saved: ${e.message}`, 'bad'); }
    } }, 'Save security')));
}
