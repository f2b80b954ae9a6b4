// The audit trail: who changed what, when, with which note, and how it
// ended; refusals too. Its filters are in the address, so a view can be
// shared as a link.
// Part of app.js: the parts are joined in order (src/dashboard/mod.rs).

// ---- audit ----------------------------------------------------------------------------

const AUDIT_ACTIONS = ['replay', 'ignore', 'erase', 'bulk_replay', 'bulk_ignore', 'pause', 'resume',
  'sweep', 'backup', 'promote', 'key_delete', 'key_change', 'other'];
const AUDIT_KEYS = ['person', 'action', 'from', 'to'];
// Actions whose target is an event: the row links to it.
const EVENT_ACTIONS = ['replay', 'ignore', 'erase'];

function auditOutcome(o) {
  if (!o) return h('span', { class: 'muted', text: 'no answer (the server stopped)' });
  const ok = o.status >= 200 && o.status < 300;
  const counts = o.matched !== undefined ? ` · ${o.matched} matched, ${o.changed} changed` : '';
  return h('span', { class: ok ? 'status delivered' : 'status dead', text: `${o.status}${counts}` });
}

function auditRow(e) {
  const args = Object.entries(e.filter || {}).map(([k, v]) => `${k}=${v}`);
  if (e.dry_run) args.push('dry run');
  const target = e.target && EVENT_ACTIONS.includes(e.action)
    ? h('a', { href: `#/event/${encodeURIComponent(e.target)}`, text: e.target })
    : (e.target || '—');
  const error = e.outcome && e.outcome.error;
  return h('tr', { 'data-audit': String(e.id) },
    h('td', { class: 'mono time', text: fmtTime(e.at) }),
    h('td', { text: `${e.person} (${e.role})` }),
    h('td', { text: e.action.replace('_', ' ') }),
    h('td', { class: 'mono wrap' }, target),
    h('td', { class: 'mono wrap hide-narrow', text: args.join(' ') || '—' }),
    h('td', {}, auditOutcome(e.outcome)),
    h('td', { class: 'wrap' }, e.note ? h('span', { text: e.note }) : null,
      error ? h('span', { class: 'error', text: `${e.note ? ' — ' : ''}${error}` }) : null));
}

async function audit(params) {
  const filter = {};
  for (const k of ['person', 'action']) if (params.get(k)) filter[k] = params.get(k);
  for (const k of ['from', 'to']) {
    const at = params.get(k);
    if (at && !isNaN(new Date(at))) filter[k] = new Date(at).toISOString();
  }
  const form = h('form', {
    class: 'filters panel', 'aria-label': 'Filters',
    onsubmit: (ev) => {
      ev.preventDefault();
      const next = new URLSearchParams();
      for (const k of AUDIT_KEYS) {
        let v = form.elements[k].value.trim();
        if ((k === 'from' || k === 'to') && v) v = new Date(v).toISOString();
        if (v) next.set(k, v);
      }
      location.hash = `#/audit?${next}`;
    },
  },
  textInput('person', 'Person', filter.person || ''),
  select('action', 'Action', [['', 'every action'], ...AUDIT_ACTIONS.map((a) => [a, a.replace('_', ' ')])], filter.action || ''),
  textInput('from', 'Asked from', toLocalInput(filter.from), { type: 'datetime-local' }),
  textInput('to', 'Asked before', toLocalInput(filter.to), { type: 'datetime-local' }),
  h('div', { class: 'actions' }, h('button', { type: 'submit', text: 'Filter' })));
  const body = h('div');
  fill(view,
    h('h1', { text: 'Audit trail' }),
    h('p', { class: 'muted', text: 'Every change made through the API, the CLI or this dashboard, and every one refused: ' +
      'who, when, what, the note and the outcome. Kept for retention.audit_ttl (a year by default).' }),
    form, body);
  const render = async () => {
    const query = new URLSearchParams(filter);
    if (params.get('cursor')) query.set('cursor', params.get('cursor'));
    const page = await api('GET', `/api/audit?${query}`);
    if (document.querySelector('dialog[open]')) return;
    const focused = focusKey(body);
    fill(body,
      page.entries.length
        ? table('Audit trail', ['When', 'Who', 'Action', 'Target', h('th', { class: 'hide-narrow', text: 'Arguments' }),
          'Outcome', 'Note or error'], page.entries.map(auditRow), { id: 'audit' })
        : h('p', { class: 'muted', id: 'audit-empty', text: 'Nothing recorded matches.' }),
      h('div', { class: 'actions' },
        params.get('cursor') ? h('a', { href: `#/audit?${new URLSearchParams(filter)}`, text: 'Newest' }) : null,
        page.next_cursor !== null
          ? h('a', {
            id: 'audit-older',
            href: `#/audit?${new URLSearchParams(Object.assign({}, filter, { cursor: page.next_cursor }))}`,
            text: 'Older',
          })
          : null));
    restoreFocus(body, focused);
  };
  await render();
  // The newest page follows what people do; an older one stays put.
  if (!params.get('cursor')) every(REFRESH_MS, render);
}
