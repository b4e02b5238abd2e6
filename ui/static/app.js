// The jobmaster UI: one page per route (#/jobs, #/jobs/ID with its tasks'
// logs, #/executors, #/masters), each refreshed from the API when the event stream says that
// something it shows changed.
import { conn, get, AuthError, APIError, Stream } from './conn.js';
import { h, fmtTime } from './dom.js';
import * as jobsPage from './pages/jobs.js';
import * as jobPage from './pages/job.js';
import * as executorsPage from './pages/executors.js';
import * as mastersPage from './pages/masters.js';

const main = document.getElementById('main');

// What went wrong in the page itself is counted (the tests read it) and
// logged: a script error, or something the Content-Security-Policy
// blocked (a proxy's injected script, say).
const health = { errors: [], cspViolations: [] };
window.jobmaster = health;
window.addEventListener('error', (e) => health.errors.push(String(e.message)));
window.addEventListener('unhandledrejection', (e) => health.errors.push(String(e.reason)));
document.addEventListener('securitypolicyviolation', (e) => {
  health.cspViolations.push(`${e.violatedDirective}: ${e.blockedURI || 'inline'}`);
  console.error(`blocked by the page's Content-Security-Policy: ${e.violatedDirective} ${e.blockedURI || 'inline'}`);
});

// shared is what outlives a page: the leadership changes seen so far.
const shared = {
  leaders: [], // {time, node, token, index}
  cluster: null,
};

let page = null;
let stream = null;

const routes = [
  [/^#\/jobs\/(.+)$/, jobPage, 'jobs'],
  [/^#\/executors\/?$/, executorsPage, 'executors'],
  [/^#\/masters\/?$/, mastersPage, 'masters'],
  [/^(#\/?|#\/jobs\/?)?$/, jobsPage, 'jobs'],
];

function route() {
  if (page && page.unmount) page.unmount();
  page = null;
  const hash = location.hash;
  let found = null;
  for (const [re, mod, nav] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    try {
      found = { mod, nav, arg: m[1] ? decodeURIComponent(m[1]) : '' };
    } catch (_) { // a malformed escape: no page of ours
      found = null;
    }
    break;
  }
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', !!found && a.dataset.page === found.nav);
  }
  main.replaceChildren();
  if (!found) {
    main.append(h('section', { class: 'empty' }, h('h1', {}, 'No such page'), h('p', {}, h('a', { href: '#/jobs' }, 'Back to the jobs'))));
    return;
  }
  page = found.mod.mount(main, { arg: found.arg, shared, fail });
  page.refresh().catch(fail);
}

// fail shows what went wrong: a login form when a token is needed,
// otherwise a line above the page.
function fail(err) {
  if (err instanceof AuthError) {
    login(err);
    return;
  }
  let bar = document.getElementById('error');
  if (!bar) {
    bar = h('div', { id: 'error', class: 'error', role: 'alert' });
    main.prepend(bar);
  }
  bar.textContent = err && err.message ? err.message : String(err);
  // A master's answer that the request was wrong (an id that is no id, a
  // job that does not exist) stays until the page changes; a failure to
  // reach the masters goes with the next read that succeeds, and the read
  // is tried again meanwhile (retry); nothing else is.
  bar.dataset.answer = err instanceof APIError && err.status < 500 ? '1' : '';
  bar.dataset.retry = err instanceof APIError && [0, 502, 503, 504].includes(err.status) ? '1' : '';
}

// A read that succeeds clears the error line (but a master's answer to
// this page); a stale one says so.
conn.readers.add((staleFrom) => {
  if (!staleFrom) { clearError(); return; }
  fail(new Error(`No master knows a leader: showing what ${staleFrom} knows, which may be behind.`));
});

function clearError() {
  const bar = document.getElementById('error');
  if (bar && !bar.dataset.answer) bar.remove();
}

function login(err) {
  if (stream) { stream.stop(); stream = null; }
  document.getElementById('signout').hidden = true; // no token is in use
  if (page && page.unmount) page.unmount();
  page = null;
  const had = conn.token() !== '';
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', placeholder: 'secret id', required: true, spellcheck: 'false' });
  const form = h('form', { class: 'login', id: 'login' },
    h('h1', {}, 'Sign in'),
    h('p', {}, 'This cluster has ACLs on. Enter a token\u2019s secret: a ', h('code', {}, 'read'), ' token shows everything but the tasks\u2019 logs, a ',
      h('code', {}, 'submit'), ' token may also read the logs and cancel jobs. It is kept in this tab only (sessionStorage) and sent in the ',
      h('code', {}, 'X-Jobmaster-Token'), ' header.'),
    h('p', { class: 'muted' }, 'Where to get one: ', h('code', {}, 'jobmaster dev'), ' prints its management token (and keeps it in ',
      h('code', {}, '<data-dir>/tls/management.token'), '); a token’s holder makes more with ',
      h('code', {}, 'jobmaster acl token create --policy read'), '.'),
    had ? h('p', { class: 'warn' }, err.status === 403 ? `That token may not do this: ${err.message}` : `That token was refused: ${err.message}`) : null,
    h('label', { for: 'token' }, 'Token'),
    input,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    conn.setToken(input.value.trim());
    start();
  });
  main.replaceChildren(form);
  conn.setState('signed-out', '');
  input.focus();
}

function onEvent(e) {
  if (e.type === 'leader-established') {
    shared.leaders.push({ time: Date.now(), node: e.node, token: e.fencing_token, index: e.index });
    if (shared.leaders.length > 50) shared.leaders.shift();
    refreshCluster();
  }
  if (page && page.onEvent) page.onEvent(e);
}

async function refreshCluster() {
  try {
    const { body } = await get('/v1/cluster');
    shared.cluster = body;
    conn.learn(body);
    return body;
  } catch (err) {
    if (err instanceof AuthError) throw err;
    return null;
  }
}

async function start() {
  document.getElementById('signout').hidden = conn.token() === '';
  try {
    await refreshCluster();
  } catch (err) {
    login(err);
    return;
  }
  clearError();
  if (stream) stream.stop();
  // Gone: what came since the page was read is no longer held (a backup
  // restored, or a long disconnection): read the page again.
  stream = new Stream({}, { primary: true, onEvent, onGone: () => { refreshCluster(); if (page) page.refresh().catch(fail); }, onAuth: login, onError: fail });
  route();
}

const connText = document.getElementById('conn-text');
const connEl = document.getElementById('conn');
conn.listeners.add((state, via) => {
  connEl.dataset.state = state;
  connText.textContent = {
    live: `live \u00b7 ${via}`,
    reconnecting: 'reconnecting\u2026',
    offline: 'offline',
    connecting: 'connecting',
    'signed-out': 'signed out',
  }[state] || state;
  connEl.title = state === 'live' ? `following the event stream of ${via} since ${fmtTime(Date.now())}` : '';
});

document.getElementById('signout').addEventListener('click', () => {
  conn.setToken('');
  login(new AuthError(401, 'signed out'));
  document.getElementById('signout').hidden = true;
});

window.addEventListener('hashchange', () => { if (stream) route(); });

// What changes without an event (ages, the time since a heartbeat, the
// applied indexes) is read again every few seconds.
setInterval(() => {
  if (!page || !stream) return;
  if (page.tick) page.tick();
  // A read that failed to reach the masters (not their answer) is tried
  // again, one at a time: a page changes only on its events, and may have
  // none to come.
  const bar = document.getElementById('error');
  if (bar && bar.dataset.retry && !retrying) {
    retrying = true;
    const p = page;
    // Read, or answered (a job gone: 404): the failure to reach is over.
    const over = () => { const b = document.getElementById('error'); if (p === page && b && b.dataset.retry) b.remove(); };
    p.refresh().then(over, fail).finally(() => { retrying = false; });
  }
}, 2000);
let retrying = false;
// A token deleted meanwhile shows the sign-in form (its stream has ended).
setInterval(() => {
  if (stream) refreshCluster().catch((err) => { if (err instanceof AuthError) login(err); });
}, 10000);

start();
