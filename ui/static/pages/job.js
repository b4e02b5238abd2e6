// A job: its graph, its subtasks, what happened to it (from its events,
// since the start of the log) and a cancel button.
import { get, post, Stream, AuthError } from '../conn.js';
import { h, pill, fmtAgo, fmtDuration, fmtTime, debounce, TERMINAL_JOB } from '../dom.js';
import { dag } from './dag.js';

const HISTORY_MAX = 300;

export function mount(root, { arg: id, fail }) {
  const title = h('h1', {}, id);
  const status = h('span', { id: 'job-status' });
  const meta = h('div', { class: 'meta' });
  const message = h('p', { class: 'message', id: 'job-message' });
  const note = h('span', { class: 'note', id: 'cancel-note', role: 'status' });
  const cancel = h('button', { id: 'cancel', class: 'danger', type: 'button', disabled: true }, 'Cancel job');
  const graph = h('div', { class: 'graph' });
  const subtasks = h('tbody', { id: 'subtasks-body' });
  const history = h('ol', { class: 'history', id: 'history' });
  const historyNote = h('p', { class: 'muted small' });
  root.append(h('section', { class: 'page' },
    h('div', { class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ', h('span', { class: 'mono' }, id)),
    h('div', { class: 'head' }, title, status, h('span', { class: 'spacer' }), note, cancel),
    meta, message,
    h('h2', {}, 'Graph'), graph,
    h('h2', {}, 'Subtasks'),
    h('table', { class: 'grid', id: 'subtasks' },
      h('thead', {}, h('tr', {}, ['Vertex', 'Subtask', 'Attempt', 'State', 'Executor', 'Start', 'End', 'Duration', 'Why it ended / previous attempt']
        .map((c, i) => h('th', { class: i === 1 || i === 2 || i === 7 ? 'num' : '' }, c)))),
      subtasks),
    h('h2', {}, 'History: restarts, failures, status'), historyNote, history));

  let job = null;
  let events = [];
  let armed = null;

  function renderHeader() {
    const now = Date.now();
    title.textContent = job.name || id;
    status.replaceChildren(pill(job.status));
    meta.replaceChildren(
      h('span', { class: 'mono muted' }, job.id), ' \u00b7 submitted ', h('span', { title: fmtTime(job.submit_time_ms) }, fmtAgo(job.submit_time_ms, now)),
      job.end_time_ms ? ` \u00b7 ran for ${fmtDuration(job.end_time_ms - job.submit_time_ms)}` : ` \u00b7 running for ${fmtDuration(now - job.submit_time_ms)}`,
      ` \u00b7 ${job.restarts} restart${job.restarts === 1 ? '' : 's'}`);
    message.textContent = job.message || '';
    message.hidden = !job.message;
    const ended = TERMINAL_JOB.has(job.status);
    cancel.disabled = ended || job.status === 'CANCELLING';
    if (ended && armed) disarm();
  }

  function renderSubtasks() {
    const now = Date.now();
    const rows = [];
    for (const v of job.vertices) {
      for (const t of v.subtasks.slice().sort((a, b) => a.index - b.index)) {
        // The reason this attempt failed, or how the one before it ended.
        const p = t.previous_attempt;
        const why = (t.state === 'FAILED' || t.state === 'CANCELED') && t.message
          ? [h('span', { class: 'reason', 'data-state': t.state }, t.message)]
          : p ? [h('span', { class: 'muted' }, `attempt ${p.attempt} `), h('span', { class: 'reason', 'data-state': p.state }, `${p.state}${p.message ? ': ' + p.message : ''}`)] : [];
        rows.push(h('tr', { 'data-execution': t.execution_id, 'data-vertex': v.id, 'data-subtask': t.index, 'data-state': t.state },
          h('td', { class: 'mono' }, v.id),
          h('td', { class: 'num' }, String(t.index)),
          h('td', { class: 'num' }, String(t.attempt)),
          h('td', {}, pill(t.state)),
          h('td', { class: 'mono' }, t.executor || h('span', { class: 'muted' }, '\u2014')),
          h('td', { class: 'muted' }, fmtTime(t.start_time_ms)),
          h('td', { class: 'muted' }, fmtTime(t.end_time_ms)),
          h('td', { class: 'num' }, t.start_time_ms ? fmtDuration((t.end_time_ms || now) - t.start_time_ms) : ''),
          h('td', { class: 'why' }, why)));
      }
    }
    subtasks.replaceChildren(...rows);
  }

  function renderHistory() {
    if (events.length === 0) {
      history.replaceChildren(h('li', { class: 'muted' }, 'No restart and no failure.'));
      return;
    }
    history.replaceChildren(...events.slice().reverse().map((e) => h('li', { 'data-type': e.type },
      h('span', { class: 'when muted mono' }, fmtTime(e.time_ms)),
      e.type === 'job-restart'
        ? [pill('RESTARTING', `restart ${(e.restarts || 0) + 1}`), ' ', h('span', {}, `${e.reason}: ${e.message || ''}`)]
        : e.type === 'execution-state'
          ? [pill(e.state), ' ', h('span', { class: 'mono' }, e.execution), e.executor ? ` on ${e.executor}` : '', e.message ? `: ${e.message}` : '']
          : [pill(e.state), ' ', `job ${e.previous ? e.previous + ' \u2192 ' : ''}${e.state}`, e.message ? `: ${e.message}` : ''])));
  }

  function render() {
    if (!job) return;
    renderHeader();
    graph.replaceChildren(dag(job.vertices));
    renderSubtasks();
  }

  async function refresh() {
    try {
      const { body } = await get(`/v1/jobs/${encodeURIComponent(id)}`);
      job = body;
      render();
    } catch (err) {
      if (err.status === 404) {
        root.replaceChildren(h('section', { class: 'empty' }, h('h1', {}, 'No such job'),
          h('p', {}, 'No job ', h('code', {}, id), ' is known: it was never submitted, or it ended and was forgotten.'),
          h('p', {}, h('a', { href: '#/jobs' }, 'Back to the jobs'))));
        return;
      }
      throw err;
    }
  }
  const soon = debounce(() => refresh().catch(fail), 120);

  // The history: this job's failures, restarts and status changes, read
  // from the start of the log, then as they happen.
  function keep(e) {
    return e.type === 'job-restart' || (e.type === 'job-status') || (e.type === 'execution-state' && e.state === 'FAILED');
  }
  const stream = new Stream({ job: id, topic: 'job,execution' }, {
    from: { index: 0, offset: null },
    onEvent(e) {
      if (keep(e)) {
        events.push(e);
        if (events.length > HISTORY_MAX) events.shift();
        renderHistory();
      }
      soon();
    },
    onGone(oldest) {
      historyNote.textContent = `What happened before log index ${oldest} is no longer held by the masters.`;
    },
    onAuth: fail,
  });
  renderHistory();

  function disarm() {
    clearTimeout(armed);
    armed = null;
    cancel.textContent = 'Cancel job';
    cancel.classList.remove('armed');
  }

  cancel.addEventListener('click', async () => {
    if (!armed) {
      cancel.textContent = 'Confirm cancel';
      cancel.classList.add('armed');
      armed = setTimeout(disarm, 5000);
      return;
    }
    disarm();
    cancel.disabled = true;
    note.textContent = 'Cancelling\u2026';
    try {
      const res = await post(`/v1/jobs/${encodeURIComponent(id)}/cancel`);
      note.textContent = res.unchanged ? `The job had already ended (${res.status}).` : 'Cancel requested.';
    } catch (err) {
      if (err instanceof AuthError) note.textContent = `Refused: ${err.message}`;
      else note.textContent = `Cancel failed: ${err.message}`;
      cancel.disabled = false;
    }
    soon();
  });

  return {
    refresh,
    tick() { if (job) { renderHeader(); if (!TERMINAL_JOB.has(job.status)) renderSubtasks(); } },
    onEvent() {}, // this page follows its own stream
    unmount() { stream.stop(); disarm(); },
  };
}
