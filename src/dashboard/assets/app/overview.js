// The overview page: counts per source, destinations, the activity chart.
// Part of app.js: the parts are joined in order (src/dashboard/mod.rs).

// ---- overview ---------------------------------------------------------------

const COUNT_KEYS = ['delivered', 'pending', 'retrying', 'dead', 'ignored', 'held', 'filtered'];

function countCells(counts) {
  return COUNT_KEYS.map((k) => h('td', { class: 'num', 'data-k': k, text: counts[k] }));
}

function sourceRows(name, s) {
  const rate = s.success_rate === null ? '—' : `${(s.success_rate * 100).toFixed(1)} %`;
  // A source past its expect_within is marked quiet (the mark is CSS, so
  // the cell's text stays the name); the title says since when.
  const newest = s.newest_received_at ? `newest event ${fmtTime(s.newest_received_at)}` : 'no event stored';
  const expect = s.expect_within_ms ? `; expected within ${fmtAge(s.expect_within_ms)}` : '';
  const rows = [h('tr', { 'data-source': name, class: s.quiet ? 'quiet-source' : null },
    h('th', { scope: 'row', text: name, title: `${newest}${expect}${s.quiet ? ' (quiet)' : ''}` }),
    h('td', { class: 'num', 'data-k': 'received', text: s.since_start.received }),
    h('td', { class: 'num', 'data-k': 'duplicates', text: s.since_start.duplicates }),
    countCells(s.stored),
    h('td', { class: 'num', 'data-k': 'success_rate', text: rate }),
    h('td', { class: 'num', 'data-k': 'oldest_pending', text: fmtAge(s.oldest_pending_age_ms) }))];
  // A source with several destinations: a row each, what it holds.
  const destinations = Object.entries(s.destinations || {});
  if (destinations.length > 1) {
    for (const [dest, d] of destinations) {
      const done = d.stored.delivered + d.stored.dead;
      rows.push(h('tr', { class: 'sub', 'data-source': name, 'data-destination': dest },
        h('td', { text: `→ ${dest}` }),
        h('td', {}), h('td', {}),
        countCells(d.stored),
        h('td', { class: 'num', text: done ? `${(d.stored.delivered / done * 100).toFixed(1)} %` : '—' }),
        h('td', { class: 'num', text: fmtAge(d.oldest_pending_age_ms) })));
    }
  }
  // Every type stored now or received since the start.
  const seen = s.since_start.by_type || {};
  const types = [...new Set([...Object.keys(s.by_type), ...Object.keys(seen)])].sort();
  const none = { delivered: 0, pending: 0, retrying: 0, dead: 0, ignored: 0, held: 0 };
  for (const type of types) {
    const counts = s.by_type[type] || none;
    const since = seen[type] || { received: 0, duplicates: 0 };
    const done = counts.delivered + counts.dead;
    rows.push(h('tr', { class: 'sub', 'data-source': name, 'data-type': type },
      h('td', { text: type }),
      h('td', { class: 'num', 'data-k': 'received', text: since.received }),
      h('td', { class: 'num', 'data-k': 'duplicates', text: since.duplicates }),
      countCells(counts),
      h('td', { class: 'num', text: done ? `${(counts.delivered / done * 100).toFixed(1)} %` : '—' }),
      h('td', {})));
  }
  return rows;
}

function destinationRow(d, refresh) {
  let state = 'healthy';
  let cls = 'closed';
  if (d.paused) { state = 'paused'; cls = 'paused'; }
  else if (d.circuit === 'open') { state = 'circuit open'; cls = 'open'; }
  else if (d.circuit === 'half_open') { state = 'circuit half-open (probing)'; cls = 'half_open'; }
  const verb = d.paused ? 'resume' : 'pause';
  const button = h('button', {
    type: 'button', class: 'quiet', text: d.paused ? 'Resume' : 'Pause', 'data-focus': `pause:${d.name}`,
    'aria-label': `${d.paused ? 'Resume' : 'Pause'} deliveries to ${d.name}`,
    onclick: async () => {
      const yes = await ask({
        title: `${d.paused ? 'Resume' : 'Pause'} ${d.name}?`,
        text: d.paused
          ? 'Deliveries to it start again, oldest first.'
          : 'Deliveries to it stop; events keep arriving and wait, nothing is lost.',
        confirm: d.paused ? 'Resume' : 'Pause',
      });
      if (yes === null) return;
      try {
        const r = await api('POST', `/api/destinations/${encodeURIComponent(d.name)}/${verb}`);
        flash(`${r.name} is ${r.paused ? 'paused' : 'delivering again'}.`);
        await refresh();
      } catch (e) { showError(e); }
    },
  });
  return h('tr', { 'data-destination': d.name },
    h('th', { scope: 'row', text: d.name }),
    h('td', { class: 'mono hide-narrow', text: d.url }),
    h('td', {}, h('span', { class: `status ${cls}`, text: state }),
      d.last_failure ? h('div', { class: 'muted', text: `last failure: ${d.last_failure}` }) : null),
    h('td', { class: 'num', text: `${d.in_flight} / ${d.max_concurrency}` }),
    h('td', {}, can('operator') ? button : '—'));
}

const SERIES = [
  ['received', '#0b5cad', 'received'],
  ['delivered', '#1a7f37', 'delivered'],
  ['dead_lettered', '#b42318', 'dead-lettered'],
];

// The chart's ranges, in hours (the API keeps 168).
const RANGES = [[1, '1 h'], [6, '6 h'], [24, '24 h'], [168, '7 d']];

// Minutes a point of the chart adds up: at most 720 points.
function step(hours) {
  return Math.max(1, Math.ceil(hours * 60 / 720));
}

// Received, delivered and dead-lettered per minute (or per few minutes,
// over a day or more) over the last hours, every source added up.
function chart(minutes, hours) {
  const width = 720, height = 180, pad = 28;
  const every = step(hours);
  const end = Math.floor(Date.now() / 60000 / every);
  const start = end - Math.ceil(hours * 60 / every);
  const totals = new Map();
  for (const m of minutes) {
    const at = Math.floor(Date.parse(m.minute) / 60000 / every);
    const t = totals.get(at) || { received: 0, delivered: 0, dead_lettered: 0 };
    for (const [k] of SERIES) t[k] += m[k];
    totals.set(at, t);
  }
  let max = 1;
  for (const t of totals.values()) for (const [k] of SERIES) max = Math.max(max, t[k]);
  const x = (minute) => pad + (minute - start) / (end - start) * (width - 2 * pad);
  const y = (n) => height - pad - n / max * (height - 2 * pad);
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('role', 'img');
  const sum = (k) => [...totals.values()].reduce((a, t) => a + t[k], 0);
  svg.setAttribute('aria-label', `Last ${hours} hours: ${sum('received')} received, ` +
    `${sum('delivered')} delivered, ${sum('dead_lettered')} dead-lettered`);
  const line = (attrs) => {
    const el = document.createElementNS(ns, 'path');
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    svg.append(el);
  };
  line({ d: `M${pad} ${height - pad}H${width - pad}`, stroke: '#8c959f', fill: 'none' });
  for (const [k, color] of SERIES) {
    // Received underneath, wider: the others often follow it exactly.
    const wide = k === 'received' ? 5 : 2;
    let d = '';
    for (let m = start; m <= end; m++) {
      const t = totals.get(m);
      d += `${d ? 'L' : 'M'}${x(m).toFixed(1)} ${y(t ? t[k] : 0).toFixed(1)}`;
    }
    line({ d, stroke: color, fill: 'none', 'stroke-width': wide, 'stroke-opacity': k === 'received' ? 0.45 : 1 });
  }
  const label = (text, tx, ty, anchor) => {
    const el = document.createElementNS(ns, 'text');
    el.setAttribute('x', tx); el.setAttribute('y', ty);
    el.setAttribute('font-size', '11'); el.setAttribute('fill', '#4d5560');
    el.setAttribute('text-anchor', anchor);
    el.textContent = text;
    svg.append(el);
  };
  label(`${max} per ${every === 1 ? 'minute' : `${every} minutes`}`, pad, pad - 10, 'start');
  label(`${hours < 48 ? `${hours} h` : `${hours / 24} d`} ago`, pad, height - 8, 'start');
  label('now', width - pad, height - 8, 'end');
  return h('div', { class: 'chart panel' },
    h('div', { class: 'legend' }, SERIES.map(([, color, name]) =>
      h('span', { style: null, 'data-series': name, text: name }))),
    svg);
}

function fmtMs(ms) {
  return ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`;
}

// The 95th percentile of latency bucket counts: the bound of the bucket it
// falls in ("≤ 250 ms"), or above the last bound; null without attempts.
function p95(latency, bounds) {
  const total = latency.reduce((a, b) => a + b, 0);
  if (!total) return null;
  let seen = 0;
  for (let i = 0; i < latency.length; i++) {
    seen += latency[i];
    if (seen >= 0.95 * total) return i < bounds.length ? { ms: bounds[i], text: `≤ ${fmtMs(bounds[i])}` } : { ms: bounds[bounds.length - 1] * 2, text: `> ${fmtMs(bounds[bounds.length - 1])}` };
  }
  return null;
}

// A small line of `values` (null: no attempts then) across the range.
function sparkline(values, label, max) {
  const width = 160, height = 28;
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('class', 'spark');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  const top = Math.max(max, 1e-9);
  let d = '';
  values.forEach((v, i) => {
    if (v === null) return;
    const x = values.length > 1 ? i / (values.length - 1) * (width - 4) + 2 : width / 2;
    const y = height - 2 - v / top * (height - 4);
    d += `${d ? 'L' : 'M'}${x.toFixed(1)} ${y.toFixed(1)}`;
  });
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', d || `M0 ${height - 2}`);
  path.setAttribute('fill', 'none');
  path.setAttribute('stroke', '#0b5cad');
  path.setAttribute('stroke-width', '1.5');
  svg.append(path);
  return svg;
}

// Each destination over the range: attempts, how many failed, the error
// rate and the p95 attempt latency, each also as a line over time.
function destinationHealth(activity, hours) {
  const bounds = activity.latency_bounds_ms || [];
  // About 48 points across the range.
  const every = Math.max(1, Math.ceil(hours * 60 / 48));
  const end = Math.floor(Date.now() / 60000 / every);
  const points = Math.ceil(hours * 60 / every);
  const byDest = new Map();
  for (const m of activity.destinations || []) {
    const d = byDest.get(m.destination) || { attempts: 0, failed: 0, latency: bounds.map(() => 0).concat([0]), at: new Map() };
    d.attempts += m.attempts; d.failed += m.failed;
    m.latency.forEach((n, i) => { d.latency[i] += n; });
    const slot = Math.floor(Date.parse(m.minute) / 60000 / every);
    const s = d.at.get(slot) || { attempts: 0, failed: 0, latency: bounds.map(() => 0).concat([0]) };
    s.attempts += m.attempts; s.failed += m.failed;
    m.latency.forEach((n, i) => { s.latency[i] += n; });
    d.at.set(slot, s);
    byDest.set(m.destination, d);
  }
  if (!byDest.size) return h('p', { class: 'muted', id: 'destination-health-none', text: 'No delivery attempt in this range.' });
  const rows = [...byDest.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, d]) => {
    const slots = [];
    for (let i = end - points + 1; i <= end; i++) slots.push(d.at.get(i));
    const rates = slots.map((s) => (s && s.attempts ? s.failed / s.attempts : null));
    const lat = slots.map((s) => (s ? p95(s.latency, bounds) : null)).map((p) => (p ? p.ms : null));
    const p = p95(d.latency, bounds);
    const rate = d.attempts ? d.failed / d.attempts : 0;
    const pct = (r) => `${(r * 100).toFixed(r && r < 0.1 ? 1 : 0)} %`;
    return h('tr', { 'data-destination': name },
      h('th', { scope: 'row', text: name }),
      h('td', { class: 'num', 'data-k': 'attempts', text: d.attempts }),
      h('td', { class: 'num', 'data-k': 'failed', text: d.failed }),
      h('td', { class: 'num', 'data-k': 'error-rate', text: pct(rate) }),
      h('td', { class: 'hide-narrow' }, sparkline(rates, `${name}: error rate over the range, highest ${pct(Math.max(0, ...rates.filter((r) => r !== null)))}`, Math.max(0, ...rates.filter((r) => r !== null)))),
      h('td', { class: 'num', 'data-k': 'p95', text: p ? p.text : '—' }),
      h('td', { class: 'hide-narrow' }, sparkline(lat, `${name}: p95 latency over the range, highest ${fmtMs(Math.max(0, ...lat.filter((v) => v !== null)))}`, Math.max(0, ...lat.filter((v) => v !== null)))));
  });
  return table('Destinations over the range', ['Destination', h('th', { class: 'num', text: 'Attempts' }), h('th', { class: 'num', text: 'Failed' }),
    h('th', { class: 'num', text: 'Error rate' }), h('th', { class: 'hide-narrow', text: 'Error rate over time' }),
    h('th', { class: 'num', text: 'p95 latency' }), h('th', { class: 'hide-narrow', text: 'p95 over time' })], rows, { id: 'destination-health' });
}

// Each source with [source.reconcile]: what its passes read and the last
// one (since hookinbox started), or nothing when no source has one.
function reconcileSection(reconcile) {
  if (!reconcile.sources.length) return [];
  const row = (s) => {
    const r = s.last;
    // Svix lists nothing: it is asked to recover a span, and says not how many.
    const found = !r ? '—' : r.recovers
      ? `asked ${r.recovers} ${r.recovers === 1 ? 'time' : 'times'} to resend what failed (the provider does not say how many)`
      : `${r.listed} undelivered by the provider, ${r.held} held, ${r.resent} asked again, ${r.fetched} fetched`;
    const subscription = !r || r.subscription_active === undefined || r.subscription_active === null
      ? '—' : (r.subscription_active ? 'sending' : 'DISABLED by the provider');
    return h('tr', { 'data-source': s.source, class: r && r.outcome !== 'ok' ? 'reconcile-failed' : null },
      h('th', { scope: 'row', text: s.source }),
      h('td', { class: 'mono hide-narrow', text: s.target }),
      h('td', { 'data-k': 'last', text: r ? `${fmtTime(r.started_at)}${r.dry_run ? ' (dry run)' : ''}` : 'no pass yet' }),
      h('td', { 'data-k': 'outcome', text: r ? r.outcome : '—', title: r && r.error ? r.error : null }),
      h('td', { 'data-k': 'found', text: found }),
      h('td', { 'data-k': 'subscription', text: subscription }),
      h('td', { 'data-k': 'last_success', text: s.last_success_at ? fmtTime(s.last_success_at) : '—' }));
  };
  return [
    h('h2', { text: 'Gap fill' }),
    table('Gap fill', ['Source', h('th', { class: 'hide-narrow', text: 'Reads' }), 'Last pass', 'Outcome', 'Found', 'Subscription', 'Last success'],
      reconcile.sources.map(row), { id: 'reconcile' }),
    h('p', { class: 'muted', text: 'Each pass asks the provider’s API what it could not deliver; what hookinbox does not hold is asked for again or fetched. `hookinbox reconcile SOURCE` runs one now.' }),
  ];
}

// The chart's range picker: links, so a range is in the address.
function rangePicker(hours) {
  return h('nav', { class: 'ranges', 'aria-label': 'Chart range' }, RANGES.map(([n, text]) =>
    h('a', { href: `#/?hours=${n}`, 'aria-current': n === hours ? 'true' : null, 'data-hours': String(n), text })));
}

async function overview(params) {
  const asked = Number((params && params.get('hours')) || 6);
  const hours = RANGES.some(([n]) => n === asked) ? asked : 6;
  const body = h('div');
  fill(view, h('h1', { text: 'Overview' }), body);
  const render = async () => {
    const [stats, dests, activity, reconcile] = await Promise.all([
      api('GET', '/api/stats'),
      api('GET', '/api/destinations'),
      api('GET', `/api/activity?hours=${hours}&step=${step(hours)}`),
      api('GET', '/api/reconcile'),
    ]);
    // Not under an open dialog: closing it gives focus back to the button
    // that opened it, which must still be in the page.
    if (document.querySelector('dialog[open]')) return;
    const sources = Object.entries(stats.sources);
    const c = chart(activity.minutes, hours);
    // Colours of the legend, set from code: the policy allows no inline style.
    c.querySelectorAll('.legend span').forEach((el, i) => el.style.setProperty('--c', SERIES[i][1]));
    // The page is rebuilt: whatever had focus gets it back (else the
    // keyboard's place would fall to the start of the page every 10 s).
    const focused = focusKey(body);
    fill(body,
      h('h2', { text: 'Sources and event types' }),
      table('Sources and event types', ['Source / type', 'Received*', 'Duplicates*', 'Delivered', 'Pending', 'Retrying',
        'Dead', 'Ignored', 'Held', 'Filtered', 'Success', 'Oldest pending'].map((x, i) =>
        h('th', { scope: 'col', class: i ? 'num' : null, text: x })),
      sources.flatMap(([name, s]) => sourceRows(name, s)), { id: 'sources' }),
      h('p', { class: 'muted', text: '* since hookinbox started; the other counts are what the store holds now. ' +
        'Success: delivered / (delivered + dead).' }),
      h('h2', { text: 'Destinations' }),
      dests.destinations.length
        ? table('Destinations', ['Destination', h('th', { class: 'hide-narrow', text: 'URL' }), 'State', 'In flight', 'Action'],
          dests.destinations.map((d) => destinationRow(d, render)), { id: 'destinations' })
        : h('p', { class: 'muted', text: 'No destination is configured: events are held.' }),
      ...reconcileSection(reconcile),
      h('h2', { text: `The last ${hours < 48 ? `${hours} hours` : `${hours / 24} days`}, ${step(hours) === 1 ? 'per minute' : `per ${step(hours)} minutes`}` }),
      rangePicker(hours),
      c,
      h('h3', { text: 'Each destination' }),
      destinationHealth(activity, hours),
      h('p', { class: 'muted', text: 'Error rate: attempts that did not deliver (refused, to retry, timed out, no connection) over all attempts. ' +
        'p95: 95 % of attempts got their answer within it (buckets of 10 ms to 30 s).' }),
      h('p', { class: 'muted', text: `Updated ${fmtTime(new Date().toISOString())}; refreshes every ${REFRESH_MS / 1000} s.` }));
    restoreFocus(body, focused);
  };
  await render();
  every(REFRESH_MS, render);
}
