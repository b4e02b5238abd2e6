// A job: its graph, its subtasks (each with its log), what happened to it
// (from its events, since the start of the log) and a cancel button.
import { get, post, Stream, AuthError } from '../conn.js';
import { h, pill, fmtAgo, fmtDuration, fmtTime, debounce, setText, Rows, TERMINAL_JOB } from '../dom.js';
import { dag } from './dag.js';
import { logPanel } from './log.js';

const HISTORY_MAX = 300;
// SUBTASKS_MAX bounds the subtask table's rows (parallelism goes to 10000).
const SUBTASKS_MAX = 1000;

// drainLeft says when a drain's deadline comes (the leader's clock, read
// against this browser's).
function drainLeft(deadline, now) {
  if (!deadline) return '';
  return deadline > now ? ` (in ${fmtDuration(deadline - now)})` : ' (it has passed: they are being moved)';
}

// isJobID is the masters' rule for a job id (jobspec.CheckID).
function isJobID(id) {
  return /^[A-Za-z0-9._-]{1,128}$/.test(id) && id !== '.' && id !== '..';
}

export function mount(root, { arg: id, fail }) {
  if (!isJobID(id)) {
    // No job can have it: nothing to read or follow.
    root.append(h('section', { class: 'empty', id: 'job-invalid' }, h('h1', {}, 'No such job'),
      h('p', {}, h('code', {}, id), ' is no job id: an id is 1 to 128 letters, digits, ', h('code', {}, '.'), ', ',
        h('code', {}, '_'), ' and ', h('code', {}, '-'), '.'),
      h('p', {}, h('a', { href: '#/jobs' }, 'Back to the jobs'))));
    return { refresh: async () => {}, onEvent() {}, unmount() {} };
  }
  const title = h('h1', {}, id);
  const status = h('span', { id: 'job-status' });
  const meta = h('div', { class: 'meta' });
  const message = h('p', { class: 'message', id: 'job-message' });
  const note = h('span', { class: 'note', id: 'cancel-note', role: 'status' });
  const cancel = h('button', { id: 'cancel', class: 'danger', type: 'button', disabled: true }, 'Cancel job');
  const graph = h('div', { class: 'graph' });
  const subtasks = h('tbody', { id: 'subtasks-body' });
  const subtasksMore = h('p', { class: 'muted small' });
  // The log of a subtask's attempt, opened from its row.
  const logs = logPanel(id, { stateOf, fail });
  const history = h('ol', { class: 'history', id: 'history' });
  const historyNote = h('p', { class: 'muted small', id: 'history-note' });
  // Shown instead of the page while the job is unknown; the page comes
  // back when the job's stream shows it submitted.
  const missing = h('section', { class: 'empty', id: 'job-missing', hidden: true }, h('h1', {}, 'No such job'),
    h('p', {}, 'No job ', h('code', {}, id), ' is known: it was never submitted, or it ended and was forgotten. This page shows it if it is submitted.'),
    h('p', {}, h('a', { href: '#/jobs' }, 'Back to the jobs')));
  const page = h('section', { class: 'page' },
    h('div', { class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ', h('span', { class: 'mono' }, id)),
    h('div', { class: 'head' }, title, status, h('span', { class: 'spacer' }), note, cancel),
    meta, message,
    h('h2', {}, 'Graph'), graph,
    h('h2', {}, 'Subtasks'),
    h('table', { class: 'grid', id: 'subtasks' },
      h('thead', {}, h('tr', {}, ['Vertex', 'Subtask', 'Attempt', 'State', 'Executor', 'Start', 'End', 'Duration', 'Why it ended / previous attempt', 'Log']
        .map((c, i) => h('th', { class: i === 1 || i === 2 || i === 7 ? 'num' : '' }, c)))),
      subtasks),
    subtasksMore,
    logs.el,
    h('h2', {}, 'History: restarts, failures, status'), historyNote, history);
  root.append(missing, page);

  let job = null;
  let events = [];
  let armed = null;

  // stateOf is the state this page shows of an execution, '' if none.
  function stateOf(execution) {
    for (const v of (job && job.vertices) || []) {
      for (const t of v.subtasks) if (t.execution_id === execution) return t.state;
    }
    return '';
  }

  function renderHeader() {
    const now = Date.now();
    title.textContent = job.name || id;
    status.replaceChildren(pill(job.status));
    meta.replaceChildren(
      h('span', { class: 'mono muted' }, job.id), ' \u00b7 submitted ', h('span', { title: fmtTime(job.submit_time_ms) }, fmtAgo(job.submit_time_ms, now)),
      job.end_time_ms ? ` \u00b7 ran for ${fmtDuration(job.end_time_ms - job.submit_time_ms)}` : ` \u00b7 running for ${fmtDuration(now - job.submit_time_ms)}`,
      ` \u00b7 ${job.restarts} restart${job.restarts === 1 ? '' : 's'}`,
      // A region whose inputs are ready waits to be placed: all at once,
      // and not on a draining executor.
      job.waiting_for_drain && !TERMINAL_JOB.has(job.status)
        ? h('span', { id: 'job-waiting' }, ` \u00b7 a region waits for its tasks on ${job.waiting_for_drain}, which is draining, to end there or be moved at the drain's deadline${drainLeft(job.waiting_for_drain_deadline_ms, now)}`)
        : job.waiting_slots && !TERMINAL_JOB.has(job.status)
          ? h('span', { id: 'job-waiting' }, ` \u00b7 a region waits for ${job.waiting_slots} free slot${job.waiting_slots === 1 ? '' : 's'} at once`) : '');
    // A finished job's message is why it last restarted, not an error.
    message.textContent = job.message && job.status === 'FINISHED' ? `Last restart: ${job.message}` : job.message || '';
    message.hidden = !job.message;
    const ended = TERMINAL_JOB.has(job.status);
    cancel.disabled = ended || job.status === 'CANCELLING';
    if (ended && armed) disarm();
  }

  // silent: per executor, how long the leader has not heard from it (ms),
  // as /v1/cluster said at silentAt; a live subtask there may be gone.
  let silent = {};
  let silentAt = 0;
  const LIVE = new Set(['DEPLOYING', 'RUNNING', 'CANCELING']);
  async function readSilent() {
    const { body: c } = await get('/v1/cluster');
    silent = {};
    for (const x of c.executors || []) {
      if (x.silent_ms !== undefined) silent[x.id] = x.silent_ms;
    }
    silentAt = Date.now();
  }
  // notHeard is the note of a live subtask whose executor the leader has
  // not heard from for 2 s or more ('job status' says the same).
  function notHeard(t) {
    const ms = silent[t.executor];
    if (!LIVE.has(t.state) || ms === undefined || ms < 2000) return '';
    return `executor not heard for ${Math.round(ms / 1000)}s`;
  }

  // One row per subtask, kept across refreshes and updated in place.
  const rows = new Rows(subtasks, ({ v, t }) => {
    const c = ['attempt', 'state', 'executor', 'start', 'end', 'duration', 'why'];
    const r = Object.fromEntries(c.map((k) => [k, h('td')]));
    r.attempt.className = r.duration.className = 'num';
    r.executor.className = 'mono';
    r.start.className = r.end.className = 'muted';
    r.why.className = 'why';
    // The current attempt's log; the row's execution id says which.
    const open = h('button', { type: 'button', class: 'link log-open', title: 'its stdout and stderr' }, 'Log');
    open.addEventListener('click', () => logs.open(r.tr.dataset.execution));
    r.tr = h('tr', { 'data-vertex': v.id, 'data-subtask': t.index },
      h('td', { class: 'mono' }, v.id), h('td', { class: 'num' }, String(t.index)), c.map((k) => r[k]), h('td', {}, open));
    r.key = '';
    return r;
  }, (r, { v, t }) => {
    const now = rows.now;
    setText(r.duration, t.start_time_ms ? fmtDuration((t.end_time_ms || now) - t.start_time_ms) : '');
    const p = t.previous_attempt;
    const quiet = notHeard(t);
    const key = JSON.stringify([t.execution_id, t.state, t.executor, t.start_time_ms, t.end_time_ms, t.message, p, quiet]);
    if (key === r.key) return;
    r.key = key;
    r.tr.dataset.execution = t.execution_id;
    r.tr.dataset.state = t.state;
    setText(r.attempt, t.attempt);
    r.state.replaceChildren(pill(t.state));
    r.executor.replaceChildren(t.executor || h('span', { class: 'muted' }, '\u2014'));
    setText(r.start, fmtTime(t.start_time_ms));
    setText(r.end, fmtTime(t.end_time_ms));
    // The reason this attempt ended, and how the one before it did.
    const ended = (t.state === 'FAILED' || t.state === 'CANCELED') && t.message
      ? [h('span', { class: 'reason', 'data-state': t.state }, t.message)] : [];
    const prev = p ? `${id}/${v.id}/${t.index}/${p.attempt}` : '';
    const before = p ? [h('span', { class: 'muted' }, `${ended.length ? '; ' : ''}attempt ${p.attempt} `),
      h('span', { class: 'reason previous', 'data-state': p.state }, `${p.state}${p.message ? ': ' + p.message : ''}`), ' ',
      h('button', { type: 'button', class: 'link log-previous', title: `the log of attempt ${p.attempt}`, onclick: () => logs.open(prev) }, '(its log)')] : [];
    const warn = quiet ? [h('span', { class: 'warn', title: 'it may be gone: it is shown as it was until the executor timeout declares its executor lost' }, quiet)] : [];
    r.why.replaceChildren(...warn, ...ended, ...before);
  });

  function renderSubtasks() {
    rows.now = Date.now();
    const items = [];
    for (const v of job.vertices) {
      for (const t of v.subtasks.slice().sort((a, b) => a.index - b.index)) items.push({ v, t });
    }
    let shown = items;
    subtasksMore.textContent = '';
    if (items.length > SUBTASKS_MAX) {
      // Those with something to say (failed, a message, an attempt
      // before) first, then the others, each in the table's order.
      const says = ({ t }) => t.state === 'FAILED' || !!t.message || !!t.previous_attempt;
      const keep = new Set(items.filter(says).slice(0, SUBTASKS_MAX));
      for (const it of items) {
        if (keep.size >= SUBTASKS_MAX) break;
        keep.add(it);
      }
      shown = items.filter((it) => keep.has(it));
      subtasksMore.textContent = `Showing ${SUBTASKS_MAX} of ${items.length} subtasks: those that failed, say why they ended or ran again first ('jobmaster job status' lists all).`;
    }
    rows.show(shown, ({ v, t }) => `${v.id}/${t.index}`, h('tr', {}, h('td', { colspan: 10, class: 'none' }, 'No subtasks.')));
  }

  function renderHistory() {
    if (events.length === 0) {
      // With the job's beginning gone, only what is held can be vouched for.
      const partial = goneBefore !== null && !begun;
      history.replaceChildren(h('li', { class: 'muted' }, partial ? `No restart and no failure since log index ${goneBefore}.` : 'No restart and no failure.'));
      return;
    }
    history.replaceChildren(...events.slice().reverse().map((e) => h('li', { 'data-type': e.type },
      h('span', { class: 'when muted mono' }, fmtTime(e.time_ms)),
      e.type === 'job-restart'
        ? [pill('RESTARTING', 'restart decided'), ' ', h('span', {}, `${e.reason}: ${e.message || ''}`),
          h('span', { class: 'muted' }, ` (${e.restarts || 0} region restart${e.restarts === 1 ? '' : 's'} before)`)]
        : e.type === 'execution-state'
          ? [pill(e.state), ' ', h('span', { class: 'mono' }, e.execution), e.executor ? ` on ${e.executor}` : '', e.message ? `: ${e.message}` : '']
          : [pill(e.state), ' ', `job ${e.previous ? e.previous + ' \u2192 ' : ''}${e.state}`, jobMessage(e)])));
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
      missing.hidden = true;
      page.hidden = false;
      render();
    } catch (err) {
      if (err.status === 404) {
        job = null;
        page.hidden = true;
        missing.hidden = false;
        return;
      }
      throw err;
    }
  }
  const soon = debounce(() => refresh().catch(fail), 120);

  // The history: this job's failures, restarts and status changes, read
  // from the start of the log, then as they happen (from the last time an
  // earlier job of this id was forgotten).
  function keep(e) {
    return e.type === 'job-restart' || (e.type === 'job-status') || (e.type === 'execution-state' && e.state === 'FAILED');
  }
  // The note that history is missing is shown only while the job's own
  // beginning (its first job-status, with no previous status) has not
  // been seen: a job submitted after the oldest event held has all of it.
  let goneBefore = null;
  let begun = false;
  function renderNote() {
    historyNote.textContent = goneBefore !== null && !begun
      ? `What happened before log index ${goneBefore} is no longer held by the masters.` : '';
  }
  const stream = new Stream({ job: id, topic: 'job,execution' }, {
    from: { index: 0, offset: null },
    onEvent(e) {
      if (e.type === 'job-forgotten') {
        // What came before belongs to an earlier job of this id, which
        // ended and was forgotten: what follows is a new job's.
        events.length = 0;
        begun = false;
        renderHistory();
      }
      if (e.type === 'job-status' && !e.previous) {
        begun = true;
        renderNote();
        renderHistory();
      }
      if (keep(e)) {
        events.push(e);
        if (events.length > HISTORY_MAX) events.shift();
        renderHistory();
      }
      soon();
    },
    onGone(oldest) {
      goneBefore = oldest;
      begun = false; // seen again only if the job began after oldest
      renderNote();
      renderHistory();
      soon(); // the job may have changed, or be gone, meanwhile
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
    tick() {
      if (!job) return;
      renderHeader();
      if (TERMINAL_JOB.has(job.status)) return;
      // Whether executors answer is not in the job's events: ask the
      // cluster, at most every 2 s, while the job runs.
      if (Date.now() - silentAt >= 2000) {
        silentAt = Date.now();
        readSilent().then(renderSubtasks, () => {});
      }
      renderSubtasks();
    },
    onEvent() {}, // this page follows its own stream
    unmount() { stream.stop(); disarm(); logs.close(); },
  };
}

// jobMessage is what a job's status event says after its status: why it
// failed or was cancelled, or what it last restarted for; a job that
// finished keeps the reason of its last restart, which is no failure of
// the job's.
function jobMessage(e) {
  if (!e.message) return '';
  return e.state === 'FINISHED' ? ` (last restart: ${e.message})` : `: ${e.message}`;
}
