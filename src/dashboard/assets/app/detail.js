// One event: what happened, its payload and its deliveries.
// Part of app.js: the parts are joined in order (src/dashboard/mod.rs).

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
      h('td', {}, !can('operator') ? '—' : [
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
        })]));
  });
  return [
    h('h2', { text: 'Destinations' }),
    table('Destinations', ['Destination', 'Status', h('th', { class: 'num', text: 'Attempts' }), 'Next attempt', 'Delivered', 'Why', 'Actions'],
      rows, { id: 'deliveries' }),
  ];
}

// How often an event's page looks for news while a delivery of it is
// still to come (pending or retrying).
const LIVE_MS = 2000;

// Whether any delivery of `ev` may still change by itself.
// How it came in: a signed request says nothing more; one a reconcile pass
// fetched from the provider's API says so, and from where.
function originText(ev) {
  if (ev.origin !== 'reconciled') return null;
  const header = (name) => (ev.headers.find(([k]) => k === name) || [])[1];
  const from = header('hookinbox-fetched-from');
  const version = header('hookinbox-api-version');
  return 'Fetched from the provider’s API by a reconcile pass (hookinbox never received it; '
    + 'no signature covers it)'
    + (from ? `: ${from}` : '') + (version ? `, API version ${version}` : '');
}

function inMotion(ev) {
  return (ev.deliveries || [ev]).some((d) => d.status === 'pending');
}

async function detail(id) {
  const ev = await api('GET', `/api/events/${encodeURIComponent(id)}`);
  const path = `/api/events/${encodeURIComponent(id)}`;
  // A new render (a change, or news) replaces the old one's timer.
  stopTimers();
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
    ['Origin', originText(ev)],
    ...delivery,
    ['Payload deleted', ev.erased ? `${ev.erased.text} (${fmtTime(ev.erased.at)})` : null],
    // Its trace ([telemetry]): the id, a link when trace_url is set.
    ['Trace', ev.trace_url ? h('a', { id: 'trace', href: ev.trace_url, rel: 'noopener', text: ev.trace_id }) : ev.trace_id],
  ].filter(([, v]) => v !== null && v !== undefined);
  const text = payloadText(ev);
  fill(view,
    h('p', {}, h('a', { href: '#/events', text: '← Events' })),
    h('h1', {}, `Event ${ev.event_id} `, statusBadge(ev.status)),
    h('p', { id: 'what-happened', class: `summary ${ev.status}`, text: whatHappened(ev) }),
    inMotion(ev) ? h('p', { class: 'muted', id: 'live-note', text: `Following its deliveries: this page updates as attempts are made (every ${LIVE_MS / 1000} s).` }) : null,
    h('div', { class: 'actions' },
      can('operator') && h('button', {
        type: 'button', id: 'replay', text: 'Replay', disabled: ev.status === 'pending' || Boolean(ev.erased),
        title: ev.status === 'pending' ? 'It is waiting for delivery already.' : null,
        onclick: () => act('Replay this event?',
          several
            ? 'hookinbox delivers it again to each destination that is done with it, as a new round of attempts. To send it to one only, use the buttons under Destinations.'
            : 'hookinbox delivers it to its destination again, as a new round of attempts.',
          'Replay', async () => { await api('POST', `${path}/replay`); return `Replayed ${ev.event_id}: it is pending delivery.`; }),
      }),
      can('operator') && h('button', {
        type: 'button', id: 'ignore', class: 'quiet', text: 'Ignore…',
        disabled: ev.status === 'delivered' || ev.status === 'ignored' || ev.status === 'filtered',
        onclick: () => act('Ignore this event?',
          'It will not be delivered and leaves the dead-letter queue. The note is kept with the event.',
          'Ignore', async (note) => { await api('POST', `${path}/ignore`, { note }); return `Ignored ${ev.event_id}.`; },
          { note: 'Why (required)' }),
      }),
      can('admin') && h('button', {
        type: 'button', id: 'erase', class: 'danger', text: 'Delete payload…', disabled: Boolean(ev.erased),
        onclick: () => act('Delete this payload for good?',
          'The payload and headers are deleted and cannot be brought back. The event’s record and your note stay.',
          'Delete payload', async (note) => { await api('DELETE', path, { note }); return `Deleted the payload of ${ev.event_id}.`; },
          { note: 'Why (required)', danger: true }),
      })),
    h('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [h('dt', { text: k }),
      v instanceof Node ? h('dd', {}, v) : h('dd', { text: v })])),
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
    ev.redacted ? h('p', { class: 'muted', id: 'redacted-note', text: 'Values this source redacts are shown as "[redacted]": your role may not read them.' }) : null,
    h('pre', { class: 'payload', id: 'payload', tabindex: '0', text }),
    h('h2', { text: 'Headers' }),
    ev.headers.length
      ? table('Headers', ['Name', 'Value'], ev.headers.map(([k, v]) => h('tr', {}, h('td', { class: 'mono', text: k }), h('td', { class: 'mono', text: v }))))
      : h('p', { class: 'muted', text: 'None kept.' }),
    h('h2', { text: 'Attempts' }),
    ev.attempt_history.length
      ? h('div', { id: 'attempts' }, attemptRounds(ev.attempt_history, several))
      : h('p', { class: 'muted', text: 'No attempt yet.' }));
  // Live while a delivery may still change: news re-renders the page,
  // keeping the keyboard's place and the disclosures a person opened.
  if (inMotion(ev)) {
    const seen = JSON.stringify(ev);
    every(LIVE_MS, async () => {
      if (document.querySelector('dialog[open]')) return;
      const now = await api('GET', path);
      if (JSON.stringify(now) === seen) return;
      const focused = focusKey(view);
      const open = [...view.querySelectorAll('details')].map((d) => d.open);
      await detail(id);
      view.querySelectorAll('details').forEach((d, i) => { if (open[i]) d.open = true; });
      restoreFocus(view, focused);
    });
  }
}

// A table of [name, value] pairs, or a line saying there are none.
function headerList(label, pairs) {
  if (!pairs.length) return h('p', { class: 'muted', text: `${label}: none kept.` });
  return h('div', {}, h('h4', { text: label }),
    h('dl', { class: 'headers mono' }, pairs.flatMap(([k, v]) => [h('dt', { text: k }), h('dd', { text: v })])));
}

// What one attempt sent and got back: the request's headers (signatures
// and credentials as their first characters, as stored), the answer's
// headers and its timings.
function attemptDetails(a) {
  const timing = a.first_byte_ms !== undefined
    ? `Answer head after ${a.first_byte_ms} ms, body read by ${a.latency_ms} ms.`
    : `Ended after ${a.latency_ms} ms without an answer.`;
  return h('details', {},
    h('summary', { text: 'Request and answer' }),
    h('p', { text: timing }),
    headerList('Request headers', a.request_headers || []),
    headerList('Answer headers', a.response_headers || []),
    a.response_snippet ? h('div', {}, h('h4', { text: 'Answer (start)' }), h('pre', { class: 'snippet', text: a.response_snippet })) : null);
}

// The attempts in rounds: the first delivery, then each replay's.
function attemptRounds(history, several) {
  const rounds = new Map();
  for (const a of history) {
    const r = a.round || 0;
    if (!rounds.has(r)) rounds.set(r, []);
    rounds.get(r).push(a);
  }
  return [...rounds.keys()].sort((x, y) => x - y).map((r) => {
    const title = r === 0 ? 'First delivery' : `Replay ${r}`;
    return h('section', { 'aria-label': title, 'data-round': String(r) },
      h('h3', { text: title }),
      table(`Attempts: ${title}`, [...(several ? ['Destination'] : []), '#', 'Started', 'Outcome', 'Status',
        h('th', { class: 'num', text: 'Latency' }), 'Error', 'Answer', 'Details'],
      rounds.get(r).map((a) => h('tr', {},
        several ? h('td', { text: a.destination }) : null,
        // The `hookinbox-attempt` the app saw: each round counts from 1.
        h('td', { text: a.attempt }), h('td', { class: 'mono', text: fmtTime(a.started_at) }),
        h('td', { text: a.outcome.replace(/_/g, ' ') }), h('td', { text: a.status || '—' }),
        h('td', { class: 'num', text: `${a.latency_ms} ms` }), h('td', { text: a.error || '' }),
        h('td', { class: 'mono', text: a.response_snippet || '' }),
        h('td', {}, attemptDetails(a)))), { id: `attempts-round-${r}` }));
  });
}
