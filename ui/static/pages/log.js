// A task's log in the job page: the last part of one attempt's stdout or
// stderr, or the log followed as the task writes it, read through the
// masters (GET /v1/jobs/{id}/logs, which relays it from the executor). A
// log is text: it only ever enters the page as text nodes, never as markup.
import { readLog, APIError, AuthError, LogCut } from '../conn.js';
import { h, setText } from '../dom.js';

// TAIL is how much of a log the panel asks for: the masters' default, the
// last 1 MiB.
const TAIL = 1 << 20;
// KEEP bounds what the panel holds of a followed log: past it, the oldest
// half is dropped.
const KEEP = 4 << 20;
// WAIT_MS is how often a followed log whose task has not started yet is
// asked for again.
const WAIT_MS = 2000;

// logPanel is the panel of job's logs. stateOf(execution) is the state the
// page shows of an execution ('' if none); fail shows what the page cannot
// (a token the masters no longer know).
export function logPanel(job, { stateOf, fail }) {
  const title = h('code', { id: 'log-execution' });
  const from = h('span', { class: 'muted small', id: 'log-from' });
  const streams = ['stdout', 'stderr'].map((s) => h('button', { type: 'button', class: 'seg', 'data-stream': s }, s));
  const follow = h('input', { type: 'checkbox', id: 'log-follow' });
  const again = h('button', { type: 'button', class: 'link', id: 'log-again' }, 'Read again');
  const close = h('button', { type: 'button', class: 'link', id: 'log-close' }, 'Close');
  const status = h('p', { class: 'logstatus', id: 'log-status', role: 'status' });
  const text = h('pre', { class: 'log', id: 'log-text', tabindex: '0' });
  const el = h('section', { class: 'logpanel', id: 'log', hidden: true },
    h('div', { class: 'loghead' }, h('span', {}, 'Log of '), title, from, h('span', { class: 'spacer' }),
      h('span', { class: 'segs', role: 'group', 'aria-label': 'stream' }, streams),
      h('label', { class: 'follow' }, follow, ' Follow'), again, close),
    status, text);

  let cur = null; // {execution, stream}
  let ctrl = null; // aborts the read under way
  let waiting = null; // the timer of a followed log waiting for its task
  let held = 0; // characters in text
  let cutOlder = false; // text dropped to stay within KEEP

  function say(state, msg) {
    el.dataset.state = state;
    setText(status, msg);
  }

  function stop() {
    if (ctrl) ctrl.abort();
    ctrl = null;
    clearTimeout(waiting);
    waiting = null;
  }

  function append(s) {
    if (!s) return;
    // At the bottom already: stay there as lines come.
    const atEnd = text.scrollTop + text.clientHeight >= text.scrollHeight - 4;
    text.append(document.createTextNode(s));
    held += s.length;
    if (held > KEEP) {
      const all = text.textContent;
      text.textContent = all.slice(all.length - KEEP / 2);
      held = text.textContent.length;
      cutOlder = true;
    }
    if (atEnd) text.scrollTop = text.scrollHeight;
  }

  async function read() {
    stop();
    const me = new AbortController();
    ctrl = me;
    const { execution, stream } = cur;
    const followed = follow.checked;
    text.replaceChildren();
    held = 0;
    cutOlder = false;
    setText(from, '');
    say('reading', 'Reading\u2026');
    const params = { execution, stream, tail: String(TAIL) };
    if (followed) params.follow = '1';
    try {
      const res = await readLog(job, params, {
        signal: me.signal,
        onStart({ executor, via }) {
          setText(from, `on ${executor || 'its executor'}, through ${via}`);
          if (followed) say('following', 'Following: what the task writes appears as it writes it.');
        },
        onText: append,
      });
      if (ctrl !== me) return;
      ctrl = null;
      if (followed) {
        const st = stateOf(execution);
        say('ended', `The task has ended${st && st !== 'RUNNING' ? ` (${st})` : ''}: its log is complete.` +
          (res.bytes === 0 ? ' It is empty: the task printed nothing here, or ran on an executor of the sim runtime, which keeps no log.' : ''));
      } else if (res.bytes === 0) {
        say('empty', 'The log is empty: the task has printed nothing here yet, or it runs on an executor of the sim runtime, which keeps no log.');
      } else if (res.bytes >= TAIL) {
        say('shown', 'The last 1 MiB of the log: what came before is not shown (jobmaster job logs prints it whole).');
      } else {
        const st = stateOf(execution);
        const live = st === 'SCHEDULED' || st === 'DEPLOYING' || st === 'RUNNING' || st === 'CANCELING';
        say('shown', `The whole log${live ? ' so far' : ''}, ${res.bytes} bytes.`);
      }
      if (cutOlder) setText(status, `${status.textContent} Older lines were dropped from this page to keep it small.`);
    } catch (err) {
      if (ctrl !== me || me.signal.aborted) return;
      ctrl = null;
      if (err instanceof AuthError) {
        fail(err);
        return;
      }
      if (err instanceof LogCut) {
        say('cut', `The stream was cut short: ${err.message}. What is above may not be the whole log: read it again to go on.`);
        return;
      }
      const code = err instanceof APIError ? err.status : 0;
      const msg = err && err.message ? err.message : String(err);
      if (code === 403) {
        say('forbidden', `Reading a task's log needs a submit or management token; the token signed in may not (a log may hold secrets the task printed). ${msg}`);
      } else if (code === 409 && followed) {
        say('waiting', `${msg}. Waiting for it to start\u2026`);
        waiting = setTimeout(() => { if (cur && cur.execution === execution) read(); }, WAIT_MS);
      } else if (code === 409) {
        say('unplaced', `${msg}. Tick Follow to wait for it.`);
      } else if (code === 429) {
        // The masters' bound on one token's log reads at once: others read
        // with this token (other pages, tabs or tools).
        say('busy', `Too many logs are read with this token at once: ${msg}.`);
      } else if (code === 502) {
        say('unreachable', `Its executor is unreachable: ${msg}. A task's log lives on its executor: if the executor is gone for good, the log is gone with it; else the executor keeps it until --gc-retention after the task ended.`);
      } else if (code === 404) {
        say('gone', msg);
      } else {
        say('error', `The log could not be read: ${msg}`);
      }
    }
  }

  function open(execution, stream) {
    cur = { execution, stream: stream || (cur && cur.stream) || 'stdout' };
    setText(title, execution);
    el.dataset.execution = execution;
    for (const b of streams) b.setAttribute('aria-pressed', String(b.dataset.stream === cur.stream));
    el.hidden = false;
    read();
    el.scrollIntoView({ block: 'nearest' });
  }

  for (const b of streams) b.addEventListener('click', () => { if (cur) open(cur.execution, b.dataset.stream); });
  follow.addEventListener('change', () => { if (cur) read(); });
  again.addEventListener('click', () => { if (cur) read(); });
  close.addEventListener('click', () => {
    stop();
    cur = null;
    el.hidden = true;
    text.replaceChildren();
  });

  return { el, open, close: stop };
}
