// Small helpers: DOM building without innerHTML (the CSP allows no inline
// code, and nothing the API returns is ever parsed as markup), and the
// formats of times and durations.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVGNS = 'http://www.w3.org/2000/svg';

export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// pill is a state or status in its colour.
export function pill(state, text) {
  const st = String(state || 'UNKNOWN');
  return h('span', { class: 'pill', 'data-state': st.toUpperCase() }, text || st);
}

export function fmtDuration(ms) {
  if (ms === undefined || ms === null || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const sec = ms / 1000;
  if (sec < 60) return `${sec.toFixed(sec < 10 ? 1 : 0)} s`;
  const m = Math.floor(sec / 60), rs = Math.floor(sec % 60);
  if (m < 60) return `${m}m ${String(rs).padStart(2, '0')}s`;
  const hr = Math.floor(m / 60), rm = m % 60;
  if (hr < 48) return `${hr}h ${String(rm).padStart(2, '0')}m`;
  return `${Math.floor(hr / 24)}d ${hr % 24}h`;
}

export function fmtAgo(t, now = Date.now()) {
  if (!t) return '';
  return `${fmtDuration(Math.max(0, now - t))} ago`;
}

export function fmtTime(t) {
  if (!t) return '';
  const d = new Date(t);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  const today = new Date();
  const clock = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (d.toDateString() === today.toDateString()) return clock;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock}`;
}

// debounce runs f once, wait ms after the last call, and at the latest
// maxWait ms after the first call it has not run for: calls that keep
// coming (a busy cluster's events) still see f run every maxWait. One run
// at a time: calls during a run (f may return a promise) make one more run
// after it, so a slow refresh is never overtaken by a newer one.
export function debounce(f, wait, maxWait = 1000) {
  let timer = null;
  let first = 0;
  let running = false;
  let again = false;
  const schedule = () => {
    const now = Date.now();
    if (timer === null) first = now;
    clearTimeout(timer);
    timer = setTimeout(run, Math.max(0, Math.min(wait, first + maxWait - now)));
  };
  const run = async () => {
    timer = null;
    if (running) { again = true; return; }
    running = true;
    try {
      await f();
    } finally {
      running = false;
      if (again) { again = false; schedule(); }
    }
  };
  return schedule;
}

export const TERMINAL_JOB = new Set(['FAILED', 'CANCELED', 'FINISHED']);

// selecting reports whether the user has text selected inside el: a
// table rebuilt then would drop the selection, so its refresh waits.
export function selecting(el) {
  const sel = window.getSelection();
  return !!sel && !sel.isCollapsed && el.contains(sel.anchorNode);
}

// setText changes an element's text only when it differs, so that a
// refresh leaves alone what did not change (selection, focus, a click
// under way).
export function setText(el, text) {
  const t = String(text ?? '');
  if (el.textContent !== t) el.textContent = t;
}

// Rows keeps a table body's rows by key across refreshes: a row is built
// once, updated in place, and moved only when the order changes.
export class Rows {
  constructor(tbody, build, update) {
    this.tbody = tbody;
    this.build = build; // (item) -> row state {tr, ...}
    this.update = update; // (state, item) -> void
    this.rows = new Map();
  }

  show(items, keyOf, empty) {
    if (items.length === 0) {
      this.rows.clear();
      this.tbody.replaceChildren(empty);
      return;
    }
    const keep = new Set();
    const trs = items.map((it) => {
      const k = keyOf(it);
      keep.add(k);
      let r = this.rows.get(k);
      if (!r) {
        r = this.build(it);
        this.rows.set(k, r);
      }
      this.update(r, it);
      return r.tr;
    });
    for (const k of [...this.rows.keys()]) if (!keep.has(k)) this.rows.delete(k);
    const now = [...this.tbody.children];
    if (now.length !== trs.length || now.some((tr, i) => tr !== trs[i])) this.tbody.replaceChildren(...trs);
  }
}
