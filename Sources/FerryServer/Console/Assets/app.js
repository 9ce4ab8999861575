// The console's shell: who is logged in, the login form, and the page for the location's hash
// (#/ databases, #/db/NAME documents, #/db/NAME/doc/ID a document, #/db/NAME/new,
// #/replications, #/mesh, #/users, #/metrics).
import { access, post, del, session, ApiError } from './api.js';
import { h, say, show, field, newPage } from './ui.js';
import { databasesPage } from './databases.js';
import { documentsPage, documentPage } from './documents.js';
import { replicationsPage } from './replications.js';
import { meshPage } from './mesh.js';
import { usersPage } from './users.js';
import { metricsPage } from './metrics.js';

/** What the current page needs to stop when another one replaces it (feeds, timers). */
let stopCurrent = () => {};

async function refreshAccess() {
  session.who = await access();
  const loggedIn = session.who !== null;
  document.getElementById('nav').hidden = !loggedIn;
  document.getElementById('logout').hidden = !loggedIn || session.who.name === null;
  document.getElementById('who').textContent = loggedIn
    ? (session.who.name === null ? 'anonymous' : session.who.name) + (session.who.serverAdmin ? ' (server admin)' : '')
    : '';
  return loggedIn;
}

function loginPage() {
  const name = field('User name', { autocomplete: 'username', required: true, name: 'name' });
  const password = field('Password', { type: 'password', autocomplete: 'current-password', required: true, name: 'password' });
  const form = h('form', { class: 'login', onsubmit: async (event) => {
    event.preventDefault();
    try {
      await post('/_session', { name: name.input.value, password: password.input.value });
      say('');
      await route();
    } catch (e) {
      say(e instanceof ApiError && e.status === 401 ? 'Name or password is incorrect.' : `Login failed: ${e.message}`, 'bad');
      password.input.focus();
    }
  } }, name.label, password.label, h('button', { type: 'submit' }, 'Log in'));
  show('Log in', form);
  name.input.focus();
}

/** Shows the page the hash names; the login form when nobody is logged in. */
async function route() {
  stopCurrent();
  stopCurrent = () => {};
  newPage();
  try {
    if (!(await refreshAccess())) return loginPage();
    const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    if (parts[0] === 'replications') {
      stopCurrent = await replicationsPage();
    } else if (parts[0] === 'mesh') {
      stopCurrent = await meshPage();
    } else if (parts[0] === 'users') {
      stopCurrent = await usersPage();
    } else if (parts[0] === 'metrics') {
      stopCurrent = await metricsPage();
    } else if (parts[0] === 'db' && parts[1]) {
      const db = parts[1];
      if (parts[2] === 'doc' && parts.length > 3) stopCurrent = await documentPage(db, parts.slice(3).join('/'));
      else if (parts[2] === 'new') stopCurrent = await documentPage(db, null);
      else stopCurrent = await documentsPage(db);
    } else {
      stopCurrent = await databasesPage();
    }
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return loginPage();
    show('Error', h('p', { class: 'error' }, e.message));
  }
}

document.getElementById('logout').addEventListener('click', async () => {
  try { await del('/_session'); } catch { /* the cookie is gone either way */ }
  location.hash = '#/';
  await route();
});
window.addEventListener('hashchange', route);
route();
