// The jobs: a list filtered by text and status, newest first.
import { get } from '../conn.js';
import { h, pill, fmtAgo, fmtDuration, fmtTime, debounce, setText, Rows } from '../dom.js';

// MAX_ROWS bounds the rows shown; the filter finds the others.
const MAX_ROWS = 500;

const STATUSES = ['CREATED', 'RUNNING', 'RESTARTING', 'FAILING', 'FAILED', 'CANCELLING', 'CANCELED', 'FINISHED'];

export function mount(root, { fail }) {
  let jobs = [];
  let loaded = false; // a list has been read: until then, no empty state
  const text = h('input', { type: 'search', id: 'filter', placeholder: 'Filter by id or name', autocomplete: 'off', spellcheck: 'false' });
  const status = h('select', { id: 'status-filter', 'aria-label': 'Status' },
    h('option', { value: '' }, 'Every status'),
    h('option', { value: 'active' }, 'Not ended'),
    STATUSES.map((st) => h('option', { value: st }, st)));
  const counts = h('div', { class: 'counts' });
  const more = h('p', { class: 'muted small', id: 'jobs-more' });
  const body = h('tbody', { id: 'jobs-body' });
  root.append(h('section', { class: 'page' },
    h('div', { class: 'head' }, h('h1', {}, 'Jobs'), counts),
    h('div', { class: 'toolbar' }, text, status),
    h('table', { class: 'grid', id: 'jobs' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Job'), h('th', {}, 'Name'), h('th', {}, 'Status'), h('th', {}, 'Submitted'), h('th', { class: 'num' }, 'Age'), h('th', { class: 'num', title: 'from its submission to its end (or now)' }, 'Duration'))),
      body),
    more));

  function render() {
    const q = text.value.trim().toLowerCase();
    const want = status.value;
    const now = Date.now();
    const shown = jobs.filter((j) => {
      if (q && !j.id.toLowerCase().includes(q) && !(j.name || '').toLowerCase().includes(q)) return false;
      if (want === 'active') return !['FAILED', 'CANCELED', 'FINISHED'].includes(j.status);
      return !want || j.status === want;
    });
    const by = {};
    for (const j of jobs) by[j.status] = (by[j.status] || 0) + 1;
    counts.replaceChildren(...STATUSES.filter((st) => by[st]).map((st) => h('span', { class: 'count' }, pill(st, `${by[st]} ${st}`))));
    rows.now = now;
    more.textContent = shown.length > MAX_ROWS ? `Showing the newest ${MAX_ROWS} of ${shown.length} jobs: filter to find the others.` : '';
    const none = !loaded ? 'Reading the jobs\u2026'
      : jobs.length ? 'No job matches the filter.' : 'No jobs yet. Submit one with: jobmaster job run FILE';
    rows.show(shown.slice(0, MAX_ROWS), (j) => j.id, h('tr', {}, h('td', { colspan: 6, class: 'none' }, none)));
  }

  const rows = new Rows(body, (j) => {
    const r = { status: h('td'), submitted: h('td', { class: 'muted' }), age: h('td', { class: 'num' }), ran: h('td', { class: 'num muted' }), was: '' };
    r.tr = h('tr', { 'data-job': j.id },
      h('td', {}, h('a', { href: `#/jobs/${encodeURIComponent(j.id)}`, class: 'mono' }, j.id)),
      h('td', {}, j.name), r.status, r.submitted, r.age, r.ran);
    return r;
  }, (r, j) => {
    const now = rows.now;
    if (r.was !== j.status) {
      r.status.replaceChildren(pill(j.status));
      r.was = j.status;
    }
    setText(r.submitted, fmtTime(j.submit_time_ms));
    setText(r.age, j.submit_time_ms ? fmtAgo(j.submit_time_ms, now).replace(' ago', '') : '');
    setText(r.ran, j.submit_time_ms ? fmtDuration((j.end_time_ms || now) - j.submit_time_ms) : '');
  });

  render(); // "reading" until the first list comes

  async function refresh() {
    const { body: list } = await get('/v1/jobs');
    loaded = true;
    jobs = (list.jobs || []).slice().sort((a, b) => (b.submit_time_ms || 0) - (a.submit_time_ms || 0) || a.id.localeCompare(b.id));
    render();
  }
  const soon = debounce(() => refresh().catch(fail), 150);

  text.addEventListener('input', render);
  status.addEventListener('change', render);

  return {
    refresh,
    tick: render,
    onEvent(e) { if (e.topic === 'job') soon(); },
  };
}
