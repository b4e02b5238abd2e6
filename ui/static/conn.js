// The connection to the cluster. Reads go to any master that answers: the
// page's own first, then the others GET /v1/cluster names (a master lets
// the pages of its cluster's masters read it, docs/api.md), so that the
// page keeps working when the master it came from dies. Writes go to the
// page's own master only, which forwards them to the leader. The token is
// kept in sessionStorage: this tab only, gone when it closes.

const TOKEN_KEY = 'jobmaster-token';
const REQUEST_TIMEOUT_MS = 10000;
// A stream without a line for this long is dead (masters send a heartbeat
// after 10 s of silence); the page resumes on another master.
const STREAM_SILENCE_MS = 30000;

export class AuthError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export const conn = {
  bases: [location.origin],
  current: 0,
  listeners: new Set(),
  // readers are told of every read that succeeded: the master it came
  // from when it was a stale one, else ''.
  readers: new Set(),
  state: 'connecting',
  via: '',

  token() { return sessionStorage.getItem(TOKEN_KEY) || ''; },
  setToken(t) {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
  headers() {
    const t = this.token();
    return t ? { 'X-Jobmaster-Token': t } : {};
  },
  base() { return this.bases[this.current % this.bases.length]; },
  // next moves to the following master after base failed.
  next(base) {
    if (this.base() === base) this.current = (this.current + 1) % this.bases.length;
  },
  // learn takes the masters of a GET /v1/cluster answer as addresses to
  // read from: this page's origin first, then the others in id order.
  learn(cluster) {
    const scheme = location.protocol;
    const cur = this.base();
    const seen = new Set([location.origin]);
    const bases = [location.origin];
    for (const m of cluster.masters || []) {
      if (!m.http_addr) continue;
      const b = `${scheme}//${m.http_addr}`;
      if (!seen.has(b)) { seen.add(b); bases.push(b); }
    }
    this.bases = bases;
    this.current = Math.max(0, bases.indexOf(cur));
  },
  setState(state, via) {
    this.state = state;
    this.via = via || '';
    for (const f of this.listeners) f(state, this.via);
  },
};

function hostOf(base) { return base.replace(/^https?:\/\//, ''); }

async function errorOf(res) {
  try {
    const body = await res.json();
    if (body && body.error) return body.error;
  } catch (_) { /* not JSON */ }
  return `${res.status} ${res.statusText}`;
}

// get reads path from the first master that answers it, starting with the
// current one. It returns {body, index, stale} (index: X-Jobmaster-Index).
// When no master knows a leader (an election, or too few masters up), it
// reads the answering master's own view (?stale) and says so.
export async function get(path) {
  try {
    return await getFrom(path, false);
  } catch (err) {
    if (!(err instanceof APIError) || err.status !== 503) throw err;
    const res = await getFrom(path, true);
    return res;
  }
}

async function getFrom(path, stale) {
  let lastErr = null;
  const url = stale ? path + (path.includes('?') ? '&' : '?') + 'stale' : path;
  for (let i = 0; i < conn.bases.length; i++) {
    const base = conn.base();
    let res;
    try {
      res = await fetch(base + url, { headers: conn.headers(), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS), cache: 'no-store' });
    } catch (e) {
      if (!lastErr || lastErr.status === 0) lastErr = new APIError(0, `${hostOf(base)} does not answer`);
      conn.next(base);
      continue;
    }
    if (res.status === 401 || res.status === 403) throw new AuthError(res.status, await errorOf(res));
    if (res.status === 503 || res.status === 502 || res.status === 504) {
      // A master that answers without a leader says more than one that
      // does not answer: its 503 is what get falls back to ?stale on.
      const err = new APIError(res.status, await errorOf(res));
      if (!lastErr || lastErr.status !== 503) lastErr = err;
      conn.next(base);
      continue;
    }
    if (!res.ok) throw new APIError(res.status, await errorOf(res));
    const index = Number(res.headers.get('X-Jobmaster-Index') || 0);
    const body = await res.json();
    for (const f of conn.readers) f(stale ? hostOf(base) : '');
    return { body, index, stale };
  }
  throw lastErr || new APIError(0, 'no master answers');
}

// post writes through this page's own master.
export async function post(path) {
  let res;
  try {
    res = await fetch(path, { method: 'POST', headers: conn.headers(), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  } catch (e) {
    throw new APIError(0, `the master that served this page (${location.host}) does not answer; open the UI of another master to write`);
  }
  if (res.status === 401) throw new AuthError(res.status, await errorOf(res));
  if (!res.ok) throw new APIError(res.status, await errorOf(res));
  return res.json();
}

// LogCut is the error of a log whose answer broke off before its end: a
// master breaks off a followed log that is cut short (its executor went
// away, or the master did), so that a page, which cannot see trailers,
// tells it from a complete one (docs/api.md, GET /v1/jobs/{id}/logs).
export class LogCut extends Error {}

// readLog reads a task's log (GET /v1/jobs/{job}/logs?params) through the
// first master that answers, passing each piece of text to onText as it
// comes, and onStart({executor, via}) first. It resolves {executor, via,
// bytes} once the answer has ended: the whole log asked for, or, followed,
// the log up to its task's end. It rejects with LogCut when the answer
// broke off, AuthError for a token the masters do not know (401), and
// APIError for a master's answer, a 403 included (a read token may read
// the job, not its tasks' logs: the page says so, rather than signing
// out). The answer's headers must come within REQUEST_TIMEOUT_MS; its body
// takes as long as its task, until signal aborts it.
export async function readLog(job, params, { onStart, onText, signal }) {
  const path = `/v1/jobs/${encodeURIComponent(job)}/logs?${new URLSearchParams(params)}`;
  let lastErr = null;
  for (let i = 0; i < conn.bases.length; i++) {
    const base = conn.base();
    const ctrl = new AbortController();
    const abort = () => ctrl.abort();
    if (signal) {
      if (signal.aborted) throw new DOMException('aborted', 'AbortError');
      signal.addEventListener('abort', abort);
    }
    const timer = setTimeout(abort, REQUEST_TIMEOUT_MS);
    try {
      let res;
      try {
        res = await fetch(base + path, { headers: conn.headers(), signal: ctrl.signal, cache: 'no-store' });
      } catch (e) {
        if (signal && signal.aborted) throw e;
        if (!lastErr || lastErr.status === 0) lastErr = new APIError(0, `${hostOf(base)} does not answer`);
        conn.next(base);
        continue;
      } finally {
        clearTimeout(timer);
      }
      if (res.status === 401) throw new AuthError(res.status, await errorOf(res));
      if (res.status === 503) {
        // No leader is needed: this master is busy or stopping. (A 429,
        // this token's own bound on one master, is no reason to take
        // places on the others: it is the caller's to see.)
        lastErr = new APIError(res.status, await errorOf(res));
        conn.next(base);
        continue;
      }
      if (!res.ok) throw new APIError(res.status, await errorOf(res));
      const executor = res.headers.get('X-Jobmaster-Executor') || '';
      const via = hostOf(base);
      if (onStart) onStart({ executor, via });
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let bytes = 0;
      for (;;) {
        let part;
        try {
          part = await reader.read();
        } catch (e) {
          if (signal && signal.aborted) throw e;
          throw new LogCut(`the answer from ${via} broke off before the log's end: its executor or that master went away`);
        }
        if (part.done) break;
        bytes += part.value.length;
        onText(dec.decode(part.value, { stream: true }));
      }
      onText(dec.decode());
      return { executor, via, bytes };
    } finally {
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', abort);
    }
  }
  throw lastErr || new APIError(0, 'no master answers');
}

// Stream follows GET /v1/events?query from the cursor, on whichever master
// answers, resuming where it left off after a break (the resume rule of
// docs/api.md: the cursor of the last line read). onEvent gets each event
// (not heartbeats); onGone(oldest) is told when the master no longer
// holds what comes next, and the stream restarts from oldest.
export class Stream {
  constructor(query, { onEvent, onGone, onAuth, onError, primary = false, from = null }) {
    this.query = query;
    this.onEvent = onEvent;
    this.onGone = onGone || (() => {});
    this.onAuth = onAuth || (() => {});
    this.onError = onError || this.onAuth; // a request refused as wrong (400)
    this.primary = primary; // its state is the page's connection state
    this.cursor = from;
    this.stopped = false;
    this.ctrl = null;
    this.run();
  }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
  }

  url(base) {
    const q = new URLSearchParams(this.query);
    if (this.cursor) {
      q.set('index', String(this.cursor.index));
      if (this.cursor.offset !== null && this.cursor.offset !== undefined) q.set('offset', String(this.cursor.offset));
    }
    const qs = q.toString();
    return `${base}/v1/events${qs ? '?' + qs : ''}`;
  }

  status(state, via) { if (this.primary) conn.setState(state, via); }

  async run() {
    let failures = 0;
    while (!this.stopped) {
      const base = conn.base();
      const broke = await this.once(base);
      if (this.stopped) return;
      if (broke === 'auth') return;
      if (broke === 'gone') { failures = 0; continue; }
      failures++;
      conn.next(base);
      this.status(conn.bases.length > 1 ? 'reconnecting' : 'offline', '');
      // Every master once, quickly; then back off up to 5 s.
      const wait = failures <= conn.bases.length ? 250 : Math.min(5000, 250 * 2 ** (failures - conn.bases.length));
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  // once reads one stream from base until it breaks: 'broke', 'gone' or
  // 'auth'.
  async once(base) {
    this.ctrl = new AbortController();
    let timer = null;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.ctrl.abort(), STREAM_SILENCE_MS);
    };
    arm();
    try {
      const res = await fetch(this.url(base), { headers: conn.headers(), signal: this.ctrl.signal, cache: 'no-store' });
      if (res.status === 401 || res.status === 403) {
        this.onAuth(new AuthError(res.status, await errorOf(res)));
        return 'auth';
      }
      if (res.status === 410) {
        const body = await res.json().catch(() => ({}));
        this.cursor = { index: body.oldest_index || 0, offset: null };
        this.onGone(this.cursor.index);
        return 'gone';
      }
      if (res.status === 400) {
        // The request itself is wrong (no such topic, no job id): every
        // master answers the same, so it is not asked again.
        this.onError(new APIError(res.status, await errorOf(res)));
        return 'auth';
      }
      if (!res.ok || !res.body) return 'broke';
      this.status('live', hostOf(base));
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return 'broke';
        arm();
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line.trim()) continue;
          let e;
          try { e = JSON.parse(line); } catch (_) { return 'broke'; }
          if (e.type === 'gone') {
            this.cursor = { index: e.oldest_index || 0, offset: null };
            this.onGone(this.cursor.index);
            return 'gone';
          }
          this.cursor = { index: e.index, offset: e.offset === undefined ? null : e.offset };
          if (e.type !== 'heartbeat') this.onEvent(e);
        }
      }
    } catch (_) {
      return 'broke';
    } finally {
      clearTimeout(timer);
    }
  }
}
