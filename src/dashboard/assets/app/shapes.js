// Payload shapes: per source and event type, the JSON shape hookinbox
// learned from new events (each field, its types, how many events carried
// it) and every departure a later event made from it, newest first, each
// linking to that event (GET /api/shapes). The source filter is in the
// address, so a view can be shared; a `drift` alert links here.
// Part of app.js: the parts are joined in order (src/dashboard/mod.rs).

// ---- shapes ---------------------------------------------------------------------------

// Events a shape learns before it judges (drift::shape::WARM; the walk
// test holds the two equal).
const SHAPE_WARM = 20;
// Shapes shown with their fields open; past this many (every source at
// once) each opens on request, so the page stays short.
const SHAPES_OPEN = 5;
const CHANGE_WORDS = { missing: 'missing', added: 'added', type_changed: 'type changed' };

function driftRow(d) {
  return h('tr', { 'data-source': d.source, 'data-type': d.event_type, 'data-pointer': d.pointer },
    h('td', { class: 'mono time', text: fmtTime(d.at) }),
    h('td', { text: d.source }),
    h('td', { class: 'wrap', text: d.event_type }),
    h('td', {}, h('span', { class: `status ${d.change}`, text: CHANGE_WORDS[d.change] || d.change })),
    h('td', { class: 'mono wrap', 'data-k': 'pointer', text: d.pointer }),
    h('td', { class: 'mono', text: d.was || '—' }),
    h('td', { class: 'mono', text: d.now || '—' }),
    h('td', { class: 'mono wrap' }, h('a', { href: `#/event/${encodeURIComponent(d.event)}`, text: d.event })));
}

// Whether a shape judges yet, in words.
function shapeState(s, departures) {
  const judged = s.events >= SHAPE_WARM
    ? `Learned from ${plural(s.events, 'event')}; each new one is judged against it`
    : `Warming up: ${s.events} of ${SHAPE_WARM} events learned; the events after those are judged against it`;
  const drifted = departures ? `; ${plural(departures, 'departure')} recorded (listed above)` : '';
  return `${judged}${drifted}.`;
}

function shapeSection(s, i, departures, open) {
  const label = `${s.source} · ${s.event_type}`;
  const rows = s.fields.map((f) => h('tr', { 'data-pointer': f.pointer },
    h('td', { class: 'mono wrap', text: f.pointer }),
    h('td', { class: 'mono', text: f.types }),
    h('td', { class: 'num', text: `${f.seen} of ${s.events}` })));
  return h('section', { 'aria-labelledby': `shape-${i}`, 'data-source': s.source, 'data-type': s.event_type },
    h('h3', { id: `shape-${i}`, text: label }),
    h('p', { class: 'muted', 'data-k': 'state', text: shapeState(s, departures) }),
    s.truncated ? h('p', { class: 'muted', text: 'Some events had more fields, or deeper ones, than a shape keeps ' +
      '(256 fields, 8 levels): those were not learned.' }) : null,
    h('details', { open: open || null },
      h('summary', { text: plural(s.fields.length, 'field') }),
      rows.length
        ? table(`Fields of ${label}`, ['Field (JSON pointer)', 'Types',
          h('th', { scope: 'col', class: 'num', text: 'Seen in' })], rows, { id: `fields-${i}` })
        : h('p', { class: 'muted', text: 'No field: its events were empty objects or arrays.' })));
}

async function shapes(params) {
  const sources = await sourceNames();
  const source = params.get('source') || '';
  const form = h('form', {
    class: 'filters panel', 'aria-label': 'Filters',
    onsubmit: (ev) => {
      ev.preventDefault();
      const next = new URLSearchParams();
      const v = form.elements.source.value;
      if (v) next.set('source', v);
      location.hash = `#/shapes?${next}`;
    },
  },
  select('source', 'Source', [['', 'all sources'], ...sources.map((s) => [s, s])], source),
  h('div', { class: 'actions' }, h('button', { type: 'submit', text: 'Filter' })));
  const query = new URLSearchParams();
  if (source) query.set('source', source);
  const learned = await api('GET', `/api/shapes?${query}`);
  // Departures per shape, to say so beside it.
  const count = new Map();
  for (const d of learned.drifts) {
    const key = `${d.source}\n${d.event_type}`;
    count.set(key, (count.get(key) || 0) + 1);
  }
  const open = learned.shapes.length <= SHAPES_OPEN;
  const from = source ? ` from ${source}` : '';
  fill(view,
    h('h1', { text: 'Payload shapes' }),
    h('p', { class: 'muted', text: 'Per source and event type, the JSON fields new events carried and their types ' +
      `(up to 50 events a second are learned). After ${SHAPE_WARM} events, a later event that lacks a field every ` +
      'earlier one had, carries a new one, or a new type in one (null aside) is recorded here, once. ' +
      'That event is stored and delivered as usual.' }),
    form,
    h('h2', { text: 'Departures, newest first' }),
    learned.drifts.length
      ? table('Departures', ['When', 'Source', 'Event type', 'Change', 'Field (JSON pointer)', 'Was', 'Now', 'Event'],
        learned.drifts.map(driftRow), { id: 'drifts' })
      : h('p', { class: 'muted', id: 'drifts-empty', text: learned.shapes.length
        ? `No departure recorded${from}: every event learned so far matched its shape.`
        : `No departure recorded${from}.` }),
    h('h2', { text: 'Learned shapes' }),
    learned.shapes.length
      ? learned.shapes.map((s, i) => shapeSection(s, i, count.get(`${s.source}\n${s.event_type}`) || 0, open))
      : h('p', { class: 'muted', id: 'shapes-empty', text: `Nothing learned yet${from}: hookinbox learns a shape ` +
        'from the JSON payloads of new events (a payload that is not a JSON object or array teaches nothing).' }));
}
