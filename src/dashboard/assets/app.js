// hookinbox dashboard: a client of the admin API, nothing else.
// The admin token lives in this tab's session storage, never in a URL.
// Pages are built with DOM calls (h below), never from HTML strings, so
// nothing an event carries can run as code here.
'use strict';

const TOKEN_KEY = 'hookinbox.admin_token';
const REFRESH_MS = 10000;
const LIVE_MS = 3000;
const STATUSES = ['pending', 'held', 'delivered', 'dead', 'ignored', 'filtered'];

const view = document.getElementById('view');
const nav = document.getElementById('nav');
const flashBox = document.getElementById('flash');
let timers = [];

// ---- building blocks ----------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'text') el.textContent = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function flash(message, bad) {
  flashBox.textContent = message;
  flashBox.className = bad ? 'bad' : '';
}

function stopTimers() {
  timers.forEach(clearInterval);
  timers = [];
}

function every(ms, fn) {
  timers.push(setInterval(() => fn().catch(showError), ms));
}

function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function fmtClock(iso) {
  return fmtTime(iso).slice(11, 16);
}

function fmtAge(ms) {
  if (ms === null || ms === undefined) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function statusBadge(status) {
  return h('span', { class: `status ${status}`, text: status });
}

// A table in a box that scrolls sideways when the table is wider than the
// screen: the box is a named region a keyboard can reach and scroll.
function table(label, headers, rows, attrs) {
  const focus = attrs && attrs.id ? `table:${attrs.id}` : null;
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': label, tabindex: '0', 'data-focus': focus },
    h('table', attrs || {},
      h('thead', {}, h('tr', {}, headers.map((x) =>
        typeof x === 'string' ? h('th', { scope: 'col', text: x }) : x))),
      h('tbody', {}, rows)));
}

// What to focus again after `root` is rebuilt: the `data-focus` key or id
// of the element that has focus now, if it is inside.
function focusKey(root) {
  const el = document.activeElement;
  if (!el || el === root || !root.contains(el)) return null;
  return el.dataset.focus ? { focus: el.dataset.focus } : (el.id ? { id: el.id } : null);
}

function restoreFocus(root, key) {
  if (!key) return;
  const el = key.focus
    ? [...root.querySelectorAll('[data-focus]')].find((x) => x.dataset.focus === key.focus)
    : document.getElementById(key.id);
  if (el && root.contains(el)) el.focus({ preventScroll: true });
}

// ---- the admin API --------------------------------------------------------

class ApiFailure extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY) || ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method, headers, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiFailure('Cannot reach hookinbox. Is the service running, and is this its admin address?', 0);
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (response.ok) return data;
  const reason = data && data.reason ? data.reason : `HTTP ${response.status}`;
  if (response.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    stopTimers();
    showSignIn('hookinbox did not accept that admin token. Check it and sign in again ' +
      '(the token is in the file named by admin.token_file, or in secrets/admin.token.secret under the data directory).');
    throw new ApiFailure('signed out', 401);
  }
  const words = {
    400: `hookinbox refused the request: ${reason}`,
    404: `Not found: ${reason}`,
    409: `That cannot be done right now: ${reason}`,
    503: `The store cannot take changes right now (${reason}). Try again in a moment.`,
  };
  throw new ApiFailure(words[response.status] ||
    `Something went wrong in hookinbox (HTTP ${response.status}): ${reason}`, response.status);
}

function showError(e) {
  if (e instanceof ApiFailure && e.status === 401) return;
  flash(e.message || String(e), true);
}

// ---- dialogs: every change asks first ---------------------------------------

// Asks a question; resolves to the note typed (or '' when none is asked
// for), or null when the person cancels.
function ask({ title, text, confirm, danger, note }) {
  return new Promise((resolve) => {
    const input = note ? h('textarea', { id: 'dialog-note', 'aria-required': 'true', maxlength: '2000' }) : null;
    const problem = h('p', { class: 'error', role: 'alert' });
    const dialog = h('dialog', { 'aria-labelledby': 'dialog-title' },
      h('form', { method: 'dialog' },
        h('h2', { id: 'dialog-title', text: title }),
        h('p', { text }),
        input ? h('label', {}, note, input) : null,
        problem,
        h('div', { class: 'actions' },
          h('button', { type: 'submit', value: 'yes', id: 'dialog-confirm', class: danger ? 'danger' : null, text: confirm }),
          h('button', { type: 'submit', value: 'no', class: 'quiet', text: 'Cancel' }))));
    dialog.addEventListener('submit', (ev) => {
      const yes = ev.submitter && ev.submitter.value === 'yes';
      if (yes && input && !input.value.trim()) {
        ev.preventDefault();
        problem.textContent = 'A note is required: say why, for whoever looks at this event later.';
        input.focus();
      }
    });
    dialog.addEventListener('close', () => {
      const yes = dialog.returnValue === 'yes';
      dialog.remove();
      resolve(yes ? (input ? input.value.trim() : '') : null);
    });
    document.body.append(dialog);
    dialog.showModal();
    (input || dialog.querySelector('#dialog-confirm')).focus();
  });
}

// ---- sign-in and routing ------------------------------------------------------

function showSignIn(message) {
  nav.hidden = true;
  flash('');
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const problem = h('p', { id: 'signin-error', class: 'error', role: 'alert', text: message || '' });
  const form = h('form', {
    onsubmit: async (ev) => {
      ev.preventDefault();
      const token = input.value.trim();
      if (!token) { problem.textContent = 'Paste the admin token first.'; return; }
      sessionStorage.setItem(TOKEN_KEY, token);
      try {
        await api('GET', '/api/stats');
        route();
      } catch (e) { if (e.status !== 401) problem.textContent = e.message; }
    },
  },
  h('label', {}, 'Admin token', input),
  h('button', { type: 'submit', text: 'Sign in' }),
  problem);
  view.replaceChildren(h('section', { class: 'signin' },
    h('h1', { text: 'Sign in to hookinbox' }),
    h('p', { class: 'muted', text: 'The token stays in this browser tab only and is sent to this server alone.' }),
    form));
  input.focus();
}

function route() {
  stopTimers();
  if (!sessionStorage.getItem(TOKEN_KEY)) { showSignIn(); return; }
  nav.hidden = false;
  const [path, query] = (location.hash || '#/').slice(1).split('?');
  const params = new URLSearchParams(query || '');
  let page = 'overview';
  let show = () => overview();
  if (path === '/events') { page = 'events'; show = () => events(params); }
  else if (path.startsWith('/event/')) { page = 'events'; show = () => detail(decodeURIComponent(path.slice(7))); }
  else if (path === '/dlq') { page = 'dlq'; show = () => dlq(params); }
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  view.replaceChildren(h('p', { class: 'muted', text: 'Loading…' }));
  // Keyboard and screen-reader users land on the new page, not the link.
  show().then(() => {
    if (!view.contains(document.activeElement)) view.focus({ preventScroll: true });
  }).catch(showError);
}

// ---- overview ---------------------------------------------------------------

const COUNT_KEYS = ['delivered', 'pending', 'retrying', 'dead', 'ignored', 'held', 'filtered'];

function countCells(counts) {
  return COUNT_KEYS.map((k) => h('td', { class: 'num', 'data-k': k, text: counts[k] }));
}

function sourceRows(name, s) {
  const rate = s.success_rate === null ? '—' : `${(s.success_rate * 100).toFixed(1)} %`;
  const rows = [h('tr', { 'data-source': name },
    h('th', { scope: 'row', text: name }),
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
    h('td', {}, button));
}

const SERIES = [
  ['received', '#0b5cad', 'received'],
  ['delivered', '#1a7f37', 'delivered'],
  ['dead_lettered', '#b42318', 'dead-lettered'],
];

// Received, delivered and dead-lettered per minute over the last hours,
// every source added up.
function chart(minutes, hours) {
  const width = 720, height = 180, pad = 28;
  const end = Math.floor(Date.now() / 60000);
  const start = end - hours * 60;
  const totals = new Map();
  for (const m of minutes) {
    const at = Math.floor(Date.parse(m.minute) / 60000);
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
  label(`${max} per minute`, pad, pad - 10, 'start');
  label(`${hours} h ago`, pad, height - 8, 'start');
  label('now', width - pad, height - 8, 'end');
  return h('div', { class: 'chart panel' },
    h('div', { class: 'legend' }, SERIES.map(([, color, name]) =>
      h('span', { style: null, 'data-series': name, text: name }))),
    svg);
}

async function overview() {
  const hours = 6;
  const body = h('div');
  view.replaceChildren(h('h1', { text: 'Overview' }), body);
  const render = async () => {
    const [stats, dests, activity] = await Promise.all([
      api('GET', '/api/stats'),
      api('GET', '/api/destinations'),
      api('GET', `/api/activity?hours=${hours}`),
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
    body.replaceChildren(
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
      h('h2', { text: `The last ${hours} hours, per minute` }),
      c,
      h('p', { class: 'muted', text: `Updated ${fmtTime(new Date().toISOString())}; refreshes every ${REFRESH_MS / 1000} s.` }));
    restoreFocus(body, focused);
  };
  await render();
  every(REFRESH_MS, render);
}

// ---- events -------------------------------------------------------------------

const FILTER_KEYS = ['source', 'destination', 'status', 'type', 'event_id', 'from', 'to', 'q', 'match'];

function toLocalInput(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// An event routed to several destinations has a status at each (dead at
// one while pending at another): a line each, in the status and attempts
// cells alike.
function eventRow(ev, fresh) {
  const deliveries = ev.deliveries || [];
  const several = deliveries.length > 1;
  const lines = (cell) => h('ul', { class: 'per-destination' }, deliveries.map((d) =>
    h('li', { 'data-destination': d.destination }, cell(d))));
  return h('tr', { 'data-id': ev.id, class: fresh ? 'fresh' : null },
    h('td', { class: 'mono time', text: fmtTime(ev.received_at) }),
    h('td', { text: ev.source }),
    h('td', { class: 'wrap', text: ev.event_type || '—' }),
    h('td', { class: 'mono wrap' }, h('a', { href: `#/event/${encodeURIComponent(ev.id)}`, text: ev.event_id })),
    h('td', {}, several ? lines((d) => [statusBadge(d.status), ` at ${d.destination}`]) : statusBadge(ev.status)),
    h('td', { class: 'num' }, several ? lines((d) => String(d.attempts)) : String(ev.attempts)));
}

async function sourceNames() {
  const stats = await api('GET', '/api/stats');
  return Object.keys(stats.sources);
}

async function destinationNames() {
  return (await api('GET', '/api/destinations')).destinations.map((d) => d.name);
}

function select(id, label, options, value) {
  return h('label', {}, label, h('select', { id, name: id },
    options.map(([v, text]) => h('option', { value: v, selected: v === value, text }))));
}

function textInput(id, label, value, attrs) {
  return h('label', {}, label, h('input', Object.assign({ id, name: id, value: value || '' }, attrs || {})));
}

async function events(params) {
  const sources = await sourceNames();
  const destinations = await destinationNames();
  const get = (k) => params.get(k) || '';
  const live = h('input', { type: 'checkbox', id: 'live' });
  const form = h('form', {
    class: 'filters panel', 'aria-label': 'Filters',
    onsubmit: (ev) => {
      ev.preventDefault();
      const next = new URLSearchParams();
      for (const k of FILTER_KEYS) {
        let v = form.elements[k].value.trim();
        if ((k === 'from' || k === 'to') && v) v = new Date(v).toISOString();
        if (v) next.set(k, v);
      }
      location.hash = `#/events?${next}`;
    },
  },
  select('source', 'Source', [['', 'all sources'], ...sources.map((s) => [s, s])], get('source')),
  select('destination', 'Destination', [['', 'all destinations'], ...destinations.map((d) => [d, d])], get('destination')),
  select('status', 'Status', [['', 'any status'], ...STATUSES.map((s) => [s, s])], get('status')),
  textInput('type', 'Event type', get('type'), { placeholder: 'invoice.paid' }),
  textInput('event_id', 'Provider event id', get('event_id'), { placeholder: 'evt_…' }),
  textInput('from', 'Received from', toLocalInput(get('from')), { type: 'datetime-local' }),
  textInput('to', 'Received before', toLocalInput(get('to')), { type: 'datetime-local' }),
  textInput('q', 'Payload contains', get('q'), { placeholder: 'cus_123' }),
  textInput('match', 'JSON pointer = value', get('match'), { placeholder: '/data/object/id=in_1' }),
  h('div', { class: 'actions' },
    h('button', { type: 'submit', text: 'Search' }),
    h('a', { href: '#/events', text: 'Clear' })));

  const query = new URLSearchParams();
  // `limit` (events per page) is kept from the address, not asked for.
  for (const k of [...FILTER_KEYS, 'limit']) if (get(k)) query.set(k, get(k));
  const searching = query.has('q') || query.has('match');
  const tbody = h('tbody');
  const progress = h('p', { id: 'search-progress', class: 'muted', role: 'status' });
  const more = h('div', { class: 'actions' });
  const shown = new Set();
  let cursor = null;
  // Payloads a search has read over all its steps: each answer counts its own.
  let read = 0;
  const narrowed = ['source', 'destination', 'status', 'type', 'event_id', 'from', 'to'].some((k) => query.has(k));

  const load = async (append) => {
    const q = new URLSearchParams(query);
    if (append && cursor !== null) q.set('cursor', cursor);
    const page = await api('GET', `/api/events?${q}`);
    if (!append) { tbody.replaceChildren(); shown.clear(); read = 0; }
    // The note of an empty step is about that step: rows make it untrue.
    const note = tbody.querySelector('tr.empty');
    if (note) note.remove();
    for (const ev of page.events) { shown.add(ev.id); tbody.append(eventRow(ev)); }
    cursor = page.next_cursor;
    more.replaceChildren();
    if (searching && page.search) {
      read += page.search.examined;
      const back = page.search.scanned_back_to;
      const counts = `${plural(read, 'payload')} read`;
      const step = `${page.search.examined} in this step`;
      progress.textContent = cursor === null
        ? `Search complete: ${counts} in all (${step}); every stored event${narrowed ? ' the other filters allow' : ''} was searched.`
        : `${back ? `Scanned back to ${fmtTime(back)}` : 'Scanned'}: ${counts} so far (${step}).`;
    }
    if (cursor !== null) {
      more.append(h('button', {
        type: 'button', class: 'quiet', id: 'more',
        text: searching ? 'Continue searching' : 'Older events',
        onclick: () => load(true).catch(showError),
      }));
    }
    if (!tbody.children.length) {
      tbody.append(h('tr', { class: 'empty' }, h('td', { colspan: '6', class: 'muted',
        text: searching && cursor !== null ? 'No match yet in what was scanned.' : 'No events match.' })));
    }
  };

  // Live: the newest page again every few seconds; new rows light up.
  live.addEventListener('change', () => {
    stopTimers();
    if (!live.checked) return;
    every(LIVE_MS, async () => {
      const page = await api('GET', `/api/events?${query}`);
      const fresh = page.events.filter((ev) => !shown.has(ev.id));
      for (const ev of fresh.reverse()) { shown.add(ev.id); tbody.prepend(eventRow(ev, true)); }
      const empty = tbody.querySelector('tr.empty');
      if (fresh.length && empty) empty.remove();
    });
  });

  view.replaceChildren(
    h('h1', { text: 'Events' }),
    form,
    h('div', { class: 'actions' }, h('label', { class: 'inline' }, live, 'Live: show new events as they arrive')),
    progress,
    table('Events', ['Received', 'Source', 'Type', 'Event id', 'Status', h('th', { class: 'num', text: 'Attempts' })], [],
      { id: 'events' }),
    more);
  view.querySelector('#events tbody').replaceWith(tbody);
  await load(false);
}

// ---- event detail ---------------------------------------------------------------

// One clause per destination, for an event with several.
function whatHappenedAt(d) {
  const n = plural(d.attempts, 'attempt');
  switch (d.status) {
    case 'delivered': return `delivered to ${d.destination}`;
    case 'dead': {
      const dl = d.dead_letter || {};
      const why = dl.last_status ? `answered ${dl.last_status}` : (dl.reason || 'failed');
      return `dead at ${d.destination} (${why}, after ${n})`;
    }
    case 'pending':
      return d.attempts ? `retrying at ${d.destination} (${n} failed)` : `pending at ${d.destination}`;
    case 'ignored': return `ignored at ${d.destination}`;
    default: return `${d.status} at ${d.destination}`;
  }
}

function whatHappened(ev) {
  const deliveries = ev.deliveries || [];
  if (deliveries.length > 1) {
    const text = deliveries.map(whatHappenedAt).join('; ');
    return `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
  }
  const n = plural(ev.attempts, 'attempt');
  const last = ev.attempt_history[ev.attempt_history.length - 1];
  switch (ev.status) {
    case 'delivered':
      return `Delivered at ${fmtClock(ev.delivered_at)} after ${n}.`;
    case 'dead': {
      const dl = ev.dead_letter || {};
      const why = dl.last_status ? `your app answered ${dl.last_status}` : (dl.reason || 'it failed');
      return `Dead: ${why} at ${fmtClock(dl.at)} after ${n}.`;
    }
    case 'pending':
      if (!ev.attempts) return 'Pending: waiting for its first delivery attempt.';
      return `Retrying: ${n} failed so far` +
        (last ? ` (last: ${last.status ? `HTTP ${last.status}` : last.outcome})` : '') +
        (ev.next_attempt_at ? `; next attempt at ${fmtClock(ev.next_attempt_at)}.` : '.');
    case 'held':
      return 'Held: its source has no destination, so it is kept and not delivered.';
    case 'filtered':
      return 'Filtered: no destination’s filter takes it, so it is kept and not delivered (replay sends it anyway).';
    case 'ignored':
      return `Ignored at ${fmtClock(ev.note && ev.note.at)}: “${ev.note ? ev.note.text : ''}”`;
    default:
      return ev.status;
  }
}

// JSON text re-indented two spaces a level, each number and string exactly
// as written: JSON.stringify(JSON.parse(…)) would round an integer past
// 2^53 (820982911946154508 → …500), rewrite 2.0 as 2 and decode escapes.
// JSON.parse only checks that it is one JSON document (else null); the
// output is the input's own tokens, with whitespace only between them.
function prettyJson(text) {
  try { JSON.parse(text); } catch (e) { return null; }
  const space = ' \t\n\r';
  let out = '';
  let depth = 0;
  const newline = () => `\n${'  '.repeat(depth)}`;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      // A string, escapes and all: up to the first quote not escaped.
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j;
    } else if (c === '{' || c === '[') {
      let j = i + 1;
      while (space.includes(text[j])) j++;
      if (text[j] === (c === '{' ? '}' : ']')) { out += c + text[j]; i = j; }
      else { depth++; out += c + newline(); }
    } else if (c === '}' || c === ']') {
      depth--;
      out += newline() + c;
    } else if (c === ',') {
      out += `,${newline()}`;
    } else if (c === ':') {
      out += ': ';
    } else if (!space.includes(c)) {
      out += c;
    }
  }
  return out;
}

function payloadText(ev) {
  const p = ev.payload;
  if (p.encoding !== 'text') return `(binary, base64) ${p.data}`;
  const pretty = prettyJson(p.data);
  return pretty === null ? p.data : pretty;
}

// Each destination's delivery of an event with several, with a replay and an
// ignore that touch that destination only.
function deliveriesSection(ev, path, act) {
  const deliveries = ev.deliveries || [];
  if (deliveries.length < 2) return [];
  const rows = deliveries.map((d) => {
    const at = `?destination=${encodeURIComponent(d.destination)}`;
    return h('tr', { 'data-destination': d.destination },
      h('th', { scope: 'row', text: d.destination }),
      h('td', {}, statusBadge(d.status)),
      h('td', { class: 'num', text: d.attempts }),
      h('td', { class: 'mono', text: d.next_attempt_at ? fmtTime(d.next_attempt_at) : '—' }),
      h('td', { class: 'mono', text: d.delivered_at ? fmtTime(d.delivered_at) : '—' }),
      h('td', { text: d.dead_letter ? d.dead_letter.reason : (d.note ? d.note.text : '') }),
      h('td', {},
        h('button', {
          type: 'button', class: 'quiet', text: 'Replay here',
          'aria-label': `Replay here: ${d.destination}`,
          disabled: d.status === 'pending' || Boolean(ev.erased),
          onclick: () => act(`Replay to ${d.destination}?`,
            'hookinbox delivers it to this destination again; the others get nothing.',
            'Replay', async () => { await api('POST', `${path}/replay${at}`); return `Replayed ${ev.event_id} to ${d.destination}.`; }),
        }),
        h('button', {
          type: 'button', class: 'quiet', text: 'Ignore here…',
          'aria-label': `Ignore here: ${d.destination}`,
          disabled: !['pending', 'dead'].includes(d.status),
          onclick: () => act(`Ignore at ${d.destination}?`,
            'It will not be delivered to this destination; the others are not touched. The note is kept.',
            'Ignore', async (note) => { await api('POST', `${path}/ignore${at}`, { note }); return `Ignored ${ev.event_id} at ${d.destination}.`; },
            { note: 'Why (required)' }),
        })));
  });
  return [
    h('h2', { text: 'Destinations' }),
    table('Destinations', ['Destination', 'Status', h('th', { class: 'num', text: 'Attempts' }), 'Next attempt', 'Delivered', 'Why', 'Actions'],
      rows, { id: 'deliveries' }),
  ];
}

async function detail(id) {
  const ev = await api('GET', `/api/events/${encodeURIComponent(id)}`);
  const path = `/api/events/${encodeURIComponent(id)}`;
  const act = async (title, text, confirm, run, options) => {
    const answer = await ask(Object.assign({ title, text, confirm }, options || {}));
    if (answer === null) return;
    try {
      flash(await run(answer));
      await detail(id);
    } catch (e) { showError(e); }
  };
  const several = (ev.deliveries || []).length > 1;
  // With several destinations, each delivery's facts are in its own row.
  const delivery = several ? [] : [
    ['Attempts (this round)', ev.attempts], ['Replays', ev.replays],
    ['Next attempt', ev.next_attempt_at ? fmtTime(ev.next_attempt_at) : null],
    ['Delivered', ev.delivered_at ? fmtTime(ev.delivered_at) : null],
    ['Dead-letter reason', ev.dead_letter ? ev.dead_letter.reason : null],
    ['Note', ev.note ? `${ev.note.text} (${fmtTime(ev.note.at)})` : null],
  ];
  const facts = [
    ['hookinbox id', ev.id], ['Source', ev.source], ['Event type', ev.event_type || '—'],
    ['Provider event id', ev.event_id], ['Received', fmtTime(ev.received_at)],
    ...delivery,
    ['Payload deleted', ev.erased ? `${ev.erased.text} (${fmtTime(ev.erased.at)})` : null],
  ].filter(([, v]) => v !== null && v !== undefined);
  const text = payloadText(ev);
  view.replaceChildren(
    h('p', {}, h('a', { href: '#/events', text: '← Events' })),
    h('h1', {}, `Event ${ev.event_id} `, statusBadge(ev.status)),
    h('p', { id: 'what-happened', class: `summary ${ev.status}`, text: whatHappened(ev) }),
    h('div', { class: 'actions' },
      h('button', {
        type: 'button', id: 'replay', text: 'Replay', disabled: ev.status === 'pending' || Boolean(ev.erased),
        title: ev.status === 'pending' ? 'It is waiting for delivery already.' : null,
        onclick: () => act('Replay this event?',
          several
            ? 'hookinbox delivers it again to each destination that is done with it, as a new round of attempts. To send it to one only, use the buttons under Destinations.'
            : 'hookinbox delivers it to its destination again, as a new round of attempts.',
          'Replay', async () => { await api('POST', `${path}/replay`); return `Replayed ${ev.event_id}: it is pending delivery.`; }),
      }),
      h('button', {
        type: 'button', id: 'ignore', class: 'quiet', text: 'Ignore…',
        disabled: ev.status === 'delivered' || ev.status === 'ignored' || ev.status === 'filtered',
        onclick: () => act('Ignore this event?',
          'It will not be delivered and leaves the dead-letter queue. The note is kept with the event.',
          'Ignore', async (note) => { await api('POST', `${path}/ignore`, { note }); return `Ignored ${ev.event_id}.`; },
          { note: 'Why (required)' }),
      }),
      h('button', {
        type: 'button', id: 'erase', class: 'danger', text: 'Delete payload…', disabled: Boolean(ev.erased),
        onclick: () => act('Delete this payload for good?',
          'The payload and headers are deleted and cannot be brought back. The event’s record and your note stay.',
          'Delete payload', async (note) => { await api('DELETE', path, { note }); return `Deleted the payload of ${ev.event_id}.`; },
          { note: 'Why (required)', danger: true }),
      })),
    h('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [h('dt', { text: k }), h('dd', { text: v })])),
    ...deliveriesSection(ev, path, act),
    h('h2', { text: 'Payload' }),
    h('div', { class: 'actions' },
      h('button', {
        type: 'button', class: 'quiet', id: 'copy', text: 'Copy payload',
        onclick: async () => {
          try { await navigator.clipboard.writeText(ev.payload.data); flash('Payload copied.'); }
          catch (e) { flash('The browser did not allow copying; select the text instead.', true); }
        },
      }),
      h('span', { class: 'muted', text: ev.content_type || '' })),
    h('pre', { class: 'payload', id: 'payload', tabindex: '0', text }),
    h('h2', { text: 'Headers' }),
    ev.headers.length
      ? table('Headers', ['Name', 'Value'], ev.headers.map(([k, v]) => h('tr', {}, h('td', { class: 'mono', text: k }), h('td', { class: 'mono', text: v }))))
      : h('p', { class: 'muted', text: 'None kept.' }),
    h('h2', { text: 'Attempts' }),
    ev.attempt_history.length
      ? table('Attempts', [...(several ? ['Destination'] : []), '#', 'Started', 'Outcome', 'Status', h('th', { class: 'num', text: 'Latency' }), 'Error', 'Answer'],
        ev.attempt_history.map((a) => h('tr', {},
          several ? h('td', { text: a.destination }) : null,
          h('td', { text: a.n }), h('td', { class: 'mono', text: fmtTime(a.started_at) }),
          h('td', { text: a.outcome.replace(/_/g, ' ') }), h('td', { text: a.status || '—' }),
          h('td', { class: 'num', text: `${a.latency_ms} ms` }), h('td', { text: a.error || '' }),
          h('td', { class: 'mono', text: a.response_snippet || '' }))), { id: 'attempts' })
      : h('p', { class: 'muted', text: 'No attempt yet.' }));
}

// ---- dead-letter queue ------------------------------------------------------------

function payloadSummary(cell, id) {
  api('GET', `/api/events/${encodeURIComponent(id)}`).then((ev) => {
    const raw = ev.payload.encoding === 'text' ? ev.payload.data : '(binary)';
    cell.textContent = raw.length > 120 ? `${raw.slice(0, 120)}…` : raw;
  }).catch(() => { cell.textContent = '—'; });
}

async function dlq(params) {
  const sources = await sourceNames();
  const destinations = await destinationNames();
  const filter = { status: 'dead' };
  if (params.get('source')) filter.source = params.get('source');
  if (params.get('destination')) filter.destination = params.get('destination');
  if (params.get('type')) filter.type = params.get('type');
  const describe = ['dead', filter.destination && `at ${filter.destination}`,
    filter.source && `from ${filter.source}`, filter.type && `of type ${filter.type}`]
    .filter(Boolean).join(' ');
  const form = h('form', {
    class: 'filters panel', 'aria-label': 'Filters',
    onsubmit: (ev) => {
      ev.preventDefault();
      const next = new URLSearchParams();
      for (const k of ['source', 'destination', 'type']) if (form.elements[k].value.trim()) next.set(k, form.elements[k].value.trim());
      location.hash = `#/dlq?${next}`;
    },
  },
  select('source', 'Source', [['', 'all sources'], ...sources.map((s) => [s, s])], filter.source || ''),
  select('destination', 'Destination', [['', 'all destinations'], ...destinations.map((d) => [d, d])], filter.destination || ''),
  textInput('type', 'Event type', filter.type || ''),
  h('div', { class: 'actions' }, h('button', { type: 'submit', text: 'Filter' })));

  const filterOnly = {};
  if (filter.source) filterOnly.source = filter.source;
  if (filter.destination) filterOnly.destination = filter.destination;
  if (filter.type) filterOnly.type = filter.type;
  const query = new URLSearchParams(filter);
  if (params.get('cursor')) query.set('cursor', params.get('cursor'));
  const page = await api('GET', `/api/events?${query}`);
  const boxes = [];
  // Where each listed event is dead: what a replay or an ignore here touches.
  const deadAt = new Map();
  const rows = page.events.map((ev) => {
    const box = h('input', { type: 'checkbox', value: ev.id, 'aria-label': `Select ${ev.event_id}` });
    boxes.push(box);
    const dead = (ev.deliveries || []).filter((d) => d.status === 'dead' &&
      (!filter.destination || d.destination === filter.destination));
    deadAt.set(ev.id, dead.map((d) => d.destination));
    const letter = (dead[0] && dead[0].dead_letter) || ev.dead_letter;
    const summary = h('td', { class: 'mono hide-narrow', text: '…' });
    payloadSummary(summary, ev.id);
    return h('tr', { 'data-id': ev.id },
      h('td', {}, box),
      h('td', { class: 'mono', text: fmtTime(letter ? letter.at : ev.received_at) }),
      h('td', { text: dead.map((d) => d.destination).join(', ') || ev.source }),
      h('td', { text: ev.event_type || '—' }),
      h('td', { class: 'mono' }, h('a', { href: `#/event/${encodeURIComponent(ev.id)}`, text: ev.event_id })),
      h('td', { text: letter ? letter.reason : '' }),
      summary);
  });
  const all = h('input', {
    type: 'checkbox', 'aria-label': 'Select every event on this page',
    onchange: () => boxes.forEach((b) => { b.checked = all.checked; }),
  });
  const chosen = () => boxes.filter((b) => b.checked).map((b) => b.value);

  const onSelected = async (verb) => {
    const ids = chosen();
    if (!ids.length) { flash('Select events first.', true); return; }
    const note = await ask({
      title: `${verb === 'replay' ? 'Replay' : 'Ignore'} ${plural(ids.length, 'selected event')}?`,
      text: verb === 'replay' ? 'Each is delivered again, as a new round of attempts.' : 'They will not be delivered; the note is kept with each.',
      confirm: verb === 'replay' ? 'Replay' : 'Ignore',
      note: verb === 'ignore' ? 'Why (required)' : null,
    });
    if (note === null) return;
    let done = 0;
    const failed = [];
    for (const id of ids) {
      try {
        // At each destination where it is dead, not at those that have it.
        for (const at of deadAt.get(id) || []) {
          await api('POST', `/api/events/${encodeURIComponent(id)}/${verb}?destination=${encodeURIComponent(at)}`,
            verb === 'ignore' ? { note } : undefined);
        }
        done++;
      } catch (e) { if (e.status === 401) return; failed.push(e.message); }
    }
    flash(`${verb === 'replay' ? 'Replayed' : 'Ignored'} ${done} of ${ids.length}.` +
      (failed.length ? ` Not changed: ${failed.join('; ')}` : ''), failed.length > 0);
    await dlq(params);
  };

  // Everything the filter matches: a dry run says how many first.
  const onMatching = async (verb) => {
    try {
      const dry = await api('POST', `/api/${verb}`, { filter, dry_run: true });
      if (!dry.matched) { flash('Nothing matches this filter any more.'); return; }
      const note = await ask({
        title: `${verb === 'replay' ? 'Replay' : 'Ignore'} ${plural(dry.matched, 'event')}?`,
        text: `This ${verb === 'replay' ? 'replays' : 'ignores'} ${plural(dry.matched, 'event')}: every one ${describe}.`,
        confirm: `${verb === 'replay' ? 'Replay' : 'Ignore'} ${dry.matched}`,
        note: verb === 'ignore' ? 'Why (required)' : null,
      });
      if (note === null) return;
      const body = { filter };
      if (verb === 'ignore') body.note = note;
      const r = await api('POST', `/api/${verb}`, body);
      flash(`${verb === 'replay' ? 'Replayed' : 'Ignored'} ${r.changed} of ${r.matched}.` +
        (r.refused.length ? ` Not changed: ${r.refused.map((x) => `${x.id}: ${x.reason}`).join('; ')}` : ''),
      r.refused.length > 0);
      await dlq(params);
    } catch (e) { showError(e); }
  };

  view.replaceChildren(
    h('h1', { text: 'Dead letters' }),
    h('p', { class: 'muted', text: 'Events whose delivery failed for good. Replay them once the app is fixed, or ignore them with a note.' }),
    form,
    h('div', { class: 'actions' },
      h('button', { type: 'button', id: 'replay-selected', onclick: () => onSelected('replay'), text: 'Replay selected' }),
      h('button', { type: 'button', id: 'ignore-selected', class: 'quiet', onclick: () => onSelected('ignore'), text: 'Ignore selected…' }),
      h('button', { type: 'button', id: 'replay-matching', onclick: () => onMatching('replay'), text: 'Replay all matching…' }),
      h('button', { type: 'button', id: 'ignore-matching', class: 'quiet', onclick: () => onMatching('ignore'), text: 'Ignore all matching…' })),
    rows.length
      ? table('Dead letters', [h('th', {}, all), 'Dead since', 'Destination', 'Type', 'Event id', 'Reason', h('th', { class: 'hide-narrow', text: 'Payload' })],
        rows, { id: 'dlq' })
      : h('p', { class: 'muted', id: 'dlq-empty', text: 'The dead-letter queue is empty.' }),
    h('div', { class: 'actions' },
      params.get('cursor') ? h('a', { href: `#/dlq?${new URLSearchParams(filterOnly)}`, text: 'Newest' }) : null,
      page.next_cursor !== null
        ? h('a', {
          id: 'dlq-older',
          href: `#/dlq?${new URLSearchParams(Object.assign({}, filterOnly, { cursor: page.next_cursor }))}`,
          text: 'Older dead events',
        })
        : null,
      page.next_cursor !== null
        ? h('span', { class: 'muted', text: '“All matching” covers every page.' })
        : null));
}

// ---- start --------------------------------------------------------------------------

document.getElementById('sign-out').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = '#/';
  route();
});
window.addEventListener('hashchange', () => { flash(''); route(); });
route();
