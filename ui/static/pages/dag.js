// The job graph as SVG, laid out by topological level: a vertex's column
// is the length of the longest path from a source to it. Each vertex is
// coloured by its subtasks' states: its accent is the state that matters
// most (a failure first, then work under way), and a bar shows every
// subtask's own state.
import { s } from '../dom.js';

const W = 188, H = 70, GAP_X = 170, GAP_Y = 34, PAD = 16, MIN_SCALE = 0.6;

// PRIORITY orders the states a vertex is coloured by: the first one any
// of its subtasks is in.
const PRIORITY = ['FAILED', 'CANCELING', 'RUNNING', 'DEPLOYING', 'SCHEDULED', 'CANCELED', 'FINISHED'];

export function vertexState(v) {
  const states = new Set((v.subtasks || []).map((t) => t.state));
  for (const st of PRIORITY) if (states.has(st)) return st;
  return 'SCHEDULED';
}

export function levels(vertices) {
  const byID = new Map(vertices.map((v) => [v.id, v]));
  const level = new Map();
  const visit = (v, depth) => {
    if (level.has(v.id)) return level.get(v.id);
    if (depth > vertices.length) return 0; // a cycle cannot be submitted; never loop
    let l = 0;
    for (const in_ of v.inputs || []) {
      const p = byID.get(in_.from);
      if (p) l = Math.max(l, visit(p, depth + 1) + 1);
    }
    level.set(v.id, l);
    return l;
  };
  for (const v of vertices) visit(v, 0);
  return level;
}

// curveY is the y of the edge's curve (a cubic Bezier with horizontal
// tangents at both ends) where it crosses x.
function curveY(x1, y1, x2, y2, x) {
  const dx = (x2 - x1) / 2;
  const bx = (t) => (1 - t) ** 3 * x1 + 3 * (1 - t) ** 2 * t * (x1 + dx) + 3 * (1 - t) * t ** 2 * (x2 - dx) + t ** 3 * x2;
  let lo = 0, hi = 1;
  for (let i = 0; i < 30; i++) {
    const mid = (lo + hi) / 2;
    if (bx(mid) < x) lo = mid; else hi = mid;
  }
  const t = (lo + hi) / 2;
  return (1 - t) ** 3 * y1 + 3 * (1 - t) ** 2 * t * y1 + 3 * (1 - t) * t ** 2 * y2 + t ** 3 * y2;
}

export function dag(vertices) {
  const level = levels(vertices);
  const cols = [];
  for (const v of vertices) {
    const l = level.get(v.id);
    (cols[l] = cols[l] || []).push(v);
  }
  const rows = Math.max(1, ...cols.map((c) => (c ? c.length : 0)));
  const width = PAD * 2 + cols.length * W + Math.max(0, cols.length - 1) * GAP_X;
  const height = PAD * 2 + rows * H + (rows - 1) * GAP_Y;
  const pos = new Map();
  cols.forEach((col, l) => {
    if (!col) return;
    const top = PAD + ((rows - col.length) * (H + GAP_Y)) / 2;
    col.forEach((v, i) => pos.set(v.id, { x: PAD + l * (W + GAP_X), y: top + i * (H + GAP_Y) }));
  });

  const svg = s('svg', { id: 'dag', class: 'dag', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': 'job graph' },
    s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))));

  const edges = s('g', { class: 'edges' });
  const labels = s('g', { class: 'edge-labels' });
  for (const v of vertices) {
    for (const in_ of v.inputs || []) {
      const a = pos.get(in_.from), b = pos.get(v.id);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x - 2, y2 = b.y + H / 2;
      const dx = (x2 - x1) / 2;
      edges.append(s('path', { d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`,
        class: `edge ${in_.mode}`, 'marker-end': 'url(#arrow)', 'data-from': in_.from, 'data-to': v.id }));
      const text = `${in_.mode} \u00b7 ${in_.distribution}`;
      // The label sits in the middle of the gap after the producer, where
      // no box is: for an edge to the next column, halfway.
      const mx = x1 + GAP_X / 2;
      const my = curveY(x1, y1, x2, y2, mx);
      const tw = text.length * 6.1 + 10;
      labels.append(s('g', { class: 'edge-label', 'data-from': in_.from, 'data-to': v.id },
        s('rect', { x: mx - tw / 2, y: my - 9, width: tw, height: 18, rx: 9 }),
        s('text', { x: mx, y: my + 4, 'text-anchor': 'middle' }, text)));
    }
  }
  svg.append(edges);

  for (const v of vertices) {
    const p = pos.get(v.id);
    const st = vertexState(v);
    const subs = (v.subtasks || []).slice().sort((a, b) => a.index - b.index);
    const counts = {};
    for (const t of subs) counts[t.state] = (counts[t.state] || 0) + 1;
    const summary = PRIORITY.filter((k) => counts[k]).map((k) => `${counts[k]} ${k.toLowerCase()}`).join(' \u00b7 ');
    const g = s('g', { class: 'vertex', 'data-vertex': v.id, 'data-state': st, transform: `translate(${p.x},${p.y})` },
      s('title', {}, `${v.id}: parallelism ${v.parallelism}; ${summary}`),
      s('rect', { class: 'box', width: W, height: H, rx: 8 }),
      s('rect', { class: 'accent', width: 5, height: H, rx: 2 }),
      s('text', { class: 'name', x: 16, y: 22 }, v.id.length > 20 ? v.id.slice(0, 19) + '\u2026' : v.id),
      s('text', { class: 'par', x: W - 12, y: 22, 'text-anchor': 'end' }, `\u00d7${v.parallelism}`),
      s('text', { class: 'summary', x: 16, y: 40 }, summary));
    // One cell per subtask, in its state's colour (proportional beyond 40).
    const barW = W - 28, n = subs.length;
    if (n > 0 && n <= 40) {
      const cw = barW / n;
      subs.forEach((t, i) => g.append(s('rect', { class: 'cell', 'data-state': t.state, x: 16 + i * cw, y: 50, width: Math.max(1, cw - 2), height: 8, rx: 2 },
        s('title', {}, `subtask ${t.index}: ${t.state}`))));
    } else if (n > 40) {
      let x = 16;
      for (const k of PRIORITY) {
        if (!counts[k]) continue;
        const w = (barW * counts[k]) / n;
        g.append(s('rect', { class: 'cell', 'data-state': k, x, y: 50, width: Math.max(1, w - 1), height: 8 }));
        x += w;
      }
    }
    svg.append(g);
  }
  svg.append(labels);
  // A wide graph shrinks to fit, but not below MIN_SCALE: beyond that its
  // box scrolls. (CSSOM, which the CSP allows; a style attribute it would
  // block.)
  svg.style.minWidth = `${Math.round(width * MIN_SCALE)}px`;
  return svg;
}
