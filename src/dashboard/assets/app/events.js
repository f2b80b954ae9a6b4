// The events page: filters, search and the list.
// Part of app.js: the parts are joined in order (src/dashboard/mod.rs).

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
    if (!append) { fill(tbody); shown.clear(); read = 0; }
    // The note of an empty step is about that step: rows make it untrue.
    const note = tbody.querySelector('tr.empty');
    if (note) note.remove();
    for (const ev of page.events) { shown.add(ev.id); tbody.append(eventRow(ev)); }
    cursor = page.next_cursor;
    fill(more);
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

  // Live: each new event as the server stores it (its event stream), on
  // top; new rows light up. The stream takes the list's source,
  // destination, status and type; the rest is checked here. A payload
  // search or a "received before" bound is not followed live.
  const liveState = h('span', { id: 'live-state', class: 'muted', role: 'status' });
  let stopLive = null;
  if (searching || get('to')) {
    live.disabled = true;
    live.title = 'Live mode shows new events: not with a payload search or a "Received before" bound.';
  }
  const wanted = (ev) => (!get('event_id') || ev.event_id === get('event_id')) &&
    (!get('from') || new Date(ev.received_at) >= new Date(get('from')));
  const showNew = (ev) => {
    if (shown.has(ev.id) || !wanted(ev)) return;
    shown.add(ev.id);
    const empty = tbody.querySelector('tr.empty');
    if (empty) empty.remove();
    tbody.prepend(eventRow(ev, true));
  };
  live.addEventListener('change', () => {
    if (stopLive) { stopLive(); stopLive = null; }
    liveState.textContent = '';
    if (!live.checked) return;
    const streamQuery = new URLSearchParams();
    for (const k of ['source', 'destination', 'status', 'type']) if (get(k)) streamQuery.set(k, get(k));
    liveState.textContent = 'Connecting…';
    // The stream starts at the newest event stored when it opens; the
    // newest page read once it is open fills in what was stored since
    // the page loaded. Events streamed meanwhile wait, to stay in order.
    let waiting = [];
    stopLive = follow(streamQuery, (ev) => {
      if (waiting) waiting.push(ev); else showNew(ev);
    }, async (connected) => {
      liveState.textContent = connected ? 'Following new events as they are stored.' : 'Connection lost: reconnecting…';
      if (!connected || !waiting) return;
      try {
        const page = await api('GET', `/api/events?${query}`);
        for (const ev of page.events.slice().reverse()) showNew(ev);
      } catch (e) { showError(e); }
      const queued = waiting;
      waiting = null;
      queued.forEach(showNew);
    });
  });

  fill(view,
    h('h1', { text: 'Events' }),
    form,
    h('div', { class: 'actions' }, h('label', { class: 'inline' }, live, 'Live: show new events as they arrive'), liveState),
    progress,
    table('Events', ['Received', 'Source', 'Type', 'Event id', 'Status', h('th', { class: 'num', text: 'Attempts' })], [],
      { id: 'events' }),
    more);
  view.querySelector('#events tbody').replaceWith(tbody);
  await load(false);
}
