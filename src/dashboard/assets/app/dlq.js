// The dead-letter queue: per destination, with bulk replay and ignore.
// Part of app.js: the parts are joined in order (src/dashboard/mod.rs).

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
  // What the payload holds: text, or a JSON pointer's value.
  if (params.get('q')) filter.q = params.get('q');
  if (params.get('match')) filter.match = params.get('match');
  // A time range: when the events were received (RFC 3339 in the address).
  for (const k of ['from', 'to']) {
    const at = params.get(k);
    if (at && !isNaN(new Date(at))) filter[k] = new Date(at).toISOString();
  }
  const describe = ['dead', filter.destination && `at ${filter.destination}`,
    filter.source && `from ${filter.source}`, filter.type && `of type ${filter.type}`,
    filter.from && `received from ${fmtTime(filter.from)}`, filter.to && `received before ${fmtTime(filter.to)}`,
    filter.q && `whose payload contains “${filter.q}”`, filter.match && `whose payload has ${filter.match}`]
    .filter(Boolean).join(' ');
  const form = h('form', {
    class: 'filters panel', 'aria-label': 'Filters',
    onsubmit: (ev) => {
      ev.preventDefault();
      const next = new URLSearchParams();
      for (const k of ['source', 'destination', 'type', 'from', 'to', 'q', 'match']) {
        let v = form.elements[k].value.trim();
        if ((k === 'from' || k === 'to') && v) v = new Date(v).toISOString();
        if (v) next.set(k, v);
      }
      location.hash = `#/dlq?${next}`;
    },
  },
  select('source', 'Source', [['', 'all sources'], ...sources.map((s) => [s, s])], filter.source || ''),
  select('destination', 'Destination', [['', 'all destinations'], ...destinations.map((d) => [d, d])], filter.destination || ''),
  textInput('type', 'Event type', filter.type || ''),
  textInput('from', 'Received from', toLocalInput(filter.from), { type: 'datetime-local' }),
  textInput('to', 'Received before', toLocalInput(filter.to), { type: 'datetime-local' }),
  textInput('q', 'Payload contains', filter.q || ''),
  textInput('match', 'Payload value (/pointer=value)', filter.match || '', { placeholder: '/data/object/customer=cus_123' }),
  h('div', { class: 'actions' }, h('button', { type: 'submit', text: 'Filter' })));

  const filterOnly = {};
  if (filter.source) filterOnly.source = filter.source;
  if (filter.destination) filterOnly.destination = filter.destination;
  if (filter.type) filterOnly.type = filter.type;
  if (filter.from) filterOnly.from = filter.from;
  if (filter.to) filterOnly.to = filter.to;
  if (filter.q) filterOnly.q = filter.q;
  if (filter.match) filterOnly.match = filter.match;
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

  fill(view,
    h('h1', { text: 'Dead letters' }),
    h('p', { class: 'muted', text: 'Events whose delivery failed for good. Replay them once the app is fixed, or ignore them with a note.' }),
    form,
    can('operator') && h('div', { class: 'actions' },
      h('button', { type: 'button', id: 'replay-selected', onclick: () => onSelected('replay'), text: 'Replay selected' }),
      h('button', { type: 'button', id: 'ignore-selected', class: 'quiet', onclick: () => onSelected('ignore'), text: 'Ignore selected…' }),
      h('button', { type: 'button', id: 'replay-matching', onclick: () => onMatching('replay'), text: 'Replay all matching…' }),
      h('button', { type: 'button', id: 'ignore-matching', class: 'quiet', onclick: () => onMatching('ignore'), text: 'Ignore all matching…' })),
    rows.length
      ? table('Dead letters', [h('th', {}, all), 'Dead since', 'Destination', 'Type', 'Event id', 'Reason', h('th', { class: 'hide-narrow', text: 'Payload' })],
        rows, { id: 'dlq' })
      : h('p', { class: 'muted', id: 'dlq-empty', text: page.search ? 'None on this page of the search.' : 'The dead-letter queue is empty.' }),
    page.search ? h('p', { class: 'muted', id: 'dlq-search', text: `Looked inside ${plural(page.search.examined, 'payload')}` +
      (page.search.scanned_back_to ? ` received back to ${fmtTime(page.search.scanned_back_to)}` : '') +
      (page.next_cursor !== null ? '; older ones may match too.' : '.') }) : null,
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
