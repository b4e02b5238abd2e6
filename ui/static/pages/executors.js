// The executors: status, drain, slots in use, partitions held, and how
// long since each last answered the leader.
import { get } from '../conn.js';
import { h, pill, fmtDuration, debounce, selecting } from '../dom.js';

export function mount(root, { fail }) {
  const body = h('tbody', { id: 'executors-body' });
  const summary = h('div', { class: 'counts' });
  root.append(h('section', { class: 'page' },
    h('div', { class: 'head' }, h('h1', {}, 'Executors'), summary),
    h('table', { class: 'grid', id: 'executors' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Executor'), h('th', {}, 'Address'), h('th', {}, 'Status'),
        h('th', {}, 'Slots used'), h('th', { class: 'num' }, 'Free CPU, memory'), h('th', { class: 'num' }, 'Partitions'), h('th', { class: 'num' }, 'Last heartbeat'))),
      body)));

  async function refresh() {
    const { body: c } = await get('/v1/cluster');
    if (selecting(body)) return; // the next tick, once the user lets go
    const execs = (c.executors || []).slice().sort((a, b) => a.id.localeCompare(b.id));
    // The slots of the executors that take work: not lost, not draining.
    let slots = 0, used = 0;
    for (const x of execs) {
      if (x.status === 'lost' || x.draining) continue;
      slots += x.slots;
      used += x.slots - x.free_slots;
    }
    summary.replaceChildren(h('span', { class: 'muted', title: 'of the executors that take work (not lost, not draining)' },
      `${execs.length} executor${execs.length === 1 ? '' : 's'} \u00b7 ${used} of ${slots} slots in use`));
    if (execs.length === 0) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: 7, class: 'none' }, 'No executor has joined.')));
      return;
    }
    const now = Date.now();
    body.replaceChildren(...execs.map((x) => {
      const inUse = x.slots - x.free_slots;
      const status = [pill(x.status)];
      if (x.draining && x.status !== 'drained') {
        status.push(' ', pill('DRAINING', 'draining'));
        if (x.drain_deadline_ms) {
          status.push(h('span', { class: 'muted small', title: 'when what still runs there is moved (the leader\u2019s clock)' },
            x.drain_deadline_ms > now ? ` moved in ${fmtDuration(x.drain_deadline_ms - now)}` : ' deadline passed'));
        }
      }
      if (x.disk_full) status.push(' ', pill('FAILED', 'disk full'));
      if (x.storage_error) status.push(' ', h('span', { class: 'warn small', title: x.storage_error }, 'storage error'));
      const free = x.free_cpu_millis === undefined && x.free_memory_mb === undefined ? '\u2014'
        : `${x.free_cpu_millis ?? '?'} m \u00b7 ${x.free_memory_mb ?? '?'} MiB`;
      return h('tr', { 'data-executor': x.id },
        h('td', { class: 'mono' }, x.id),
        h('td', { class: 'mono muted' }, x.http_addr),
        h('td', {}, status),
        // A lost executor offers no free slot, and runs nothing the state
        // counts: its slots are not "in use".
        h('td', {}, x.status === 'lost'
          ? h('span', { class: 'muted', title: 'a lost executor takes no work' }, `\u2014 / ${x.slots}`)
          : h('div', { class: 'slots' }, meter(inUse, x.slots, x.status), h('span', {}, `${inUse} / ${x.slots}`))),
        h('td', { class: 'num mono', title: 'CPU (millicores) and memory the executor can still give tasks that declare them' }, free),
        h('td', { class: 'num' }, String(x.partitions ?? '')),
        h('td', { class: 'num' }, x.silent_ms === undefined ? h('span', { class: 'muted', title: 'not known to this master (not the leader)' }, '\u2014') : `${fmtDuration(x.silent_ms)} ago`));
    }));
  }

  const soon = debounce(() => refresh().catch(fail), 150);
  return {
    refresh,
    tick: () => refresh().catch(fail),
    onEvent(e) { if (e.topic === 'executor' || e.topic === 'execution') soon(); },
  };
}

// meter is slots in use out of total as cells.
function meter(used, total, status) {
  const cells = [];
  const n = Math.min(total, 32);
  for (let i = 0; i < n; i++) cells.push(h('span', { class: i < Math.round(used * n / Math.max(total, 1)) ? 'on' : '' }));
  return h('span', { class: 'meter', 'data-state': String(status).toUpperCase() }, cells);
}
