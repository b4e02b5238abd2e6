// The masters: roles, the leader and its fencing token, each master's
// applied index, and a line for every leadership change seen while the
// page is open.
import { conn, get } from '../conn.js';
import { h, pill, fmtAgo, fmtTime, debounce, selecting } from '../dom.js';

export function mount(root, { fail, shared }) {
  const summary = h('div', { class: 'leader-line', id: 'leader-line' });
  const body = h('tbody', { id: 'masters-body' });
  const changes = h('ol', { class: 'changes', id: 'leader-changes' });
  root.append(h('section', { class: 'page' },
    h('div', { class: 'head' }, h('h1', {}, 'Masters')),
    summary,
    h('table', { class: 'grid', id: 'masters' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Master'), h('th', {}, 'Address'), h('th', {}, 'Role'), h('th', {}, 'Gossip'), h('th', { class: 'num' }, 'Applied index'))),
      body),
    h('h2', {}, 'Leadership changes'),
    changes));

  let cluster = null;
  const applied = {}; // master id -> applied index, or null when it does not answer

  function render() {
    if (!cluster || selecting(body)) return; // the next tick, once the user lets go
    const leader = cluster.leader;
    const last = shared.leaders[shared.leaders.length - 1];
    summary.replaceChildren(leader
      ? h('span', {}, 'Leader ', h('strong', { class: 'mono', id: 'leader-id' }, leader), ' \u00b7 fencing token ',
        h('strong', { class: 'mono', id: 'fencing-token' }, String(cluster.fencing_token)),
        last && last.node === leader ? h('span', { class: 'muted' }, ` \u00b7 leading for ${fmtAgo(last.time).replace(' ago', '')}`) : null)
      : h('span', { class: 'warn', id: 'leader-id' }, 'No leader: an election is under way, or too few masters are up.'));
    body.replaceChildren(...(cluster.masters || []).map((m) => h('tr', { 'data-master': m.id, class: m.id === leader ? 'leader' : '' },
      h('td', { class: 'mono' }, m.id, m.id === leader ? h('span', { class: 'crown', title: 'the leader' }, ' \u2605') : null),
      h('td', { class: 'mono muted' }, m.http_addr || '\u2014'),
      h('td', {}, pill(m.role)),
      h('td', {}, pill(m.status || 'unknown')),
      h('td', { class: 'num mono' }, applied[m.id] === undefined ? '' : applied[m.id] === null ? h('span', { class: 'muted' }, 'no answer') : String(applied[m.id])))));
    if (shared.leaders.length === 0) {
      changes.replaceChildren(h('li', { class: 'muted' }, 'None since this page was opened.'));
    } else {
      changes.replaceChildren(...shared.leaders.slice().reverse().map((c) => h('li', {},
        h('span', { class: 'muted mono' }, fmtTime(c.time)), ' ', h('strong', { class: 'mono' }, c.node),
        ` became the leader with fencing token ${c.token}`)));
    }
  }

  async function appliedIndexes() {
    await Promise.all((cluster.masters || []).map(async (m) => {
      if (!m.http_addr) { applied[m.id] = null; return; }
      try {
        const res = await fetch(`${originOf(m.http_addr)}/v1/state/hash`, { headers: conn.headers(), signal: AbortSignal.timeout(3000), cache: 'no-store' });
        applied[m.id] = res.ok ? (await res.json()).applied_index : null;
      } catch (_) {
        applied[m.id] = null;
      }
    }));
  }

  // Each master's applied index is asked of it directly (it computes its
  // state hash to answer), at most every APPLIED_EVERY_MS.
  const APPLIED_EVERY_MS = 5000;
  let appliedAt = 0;
  async function refresh(force = true) {
    const { body: c } = await get('/v1/cluster');
    cluster = c;
    conn.learn(c);
    render();
    if (!force && Date.now() - appliedAt < APPLIED_EVERY_MS) return;
    appliedAt = Date.now();
    await appliedIndexes();
    render();
  }
  const soon = debounce(() => refresh().catch(fail), 100);
  return {
    refresh,
    tick: () => refresh(false).catch(fail),
    onEvent(e) { if (e.topic === 'leader') { render(); soon(); } },
  };
}

// originOf is where the page asks the master at addr: its own origin for
// the master that served it, also when the page was opened by another name
// of the same loopback address and port (localhost for 127.0.0.1), which
// the other masters would take for a foreign page.
function originOf(addr) {
  const loopback = (host) => host === 'localhost' || host === '[::1]' || host.startsWith('127.');
  const i = addr.lastIndexOf(':');
  const host = addr.slice(0, i), port = addr.slice(i + 1);
  if (addr === location.host || (port === location.port && loopback(host) && loopback(location.hostname))) return location.origin;
  return `${location.protocol}//${addr}`;
}
