// hookinbox dashboard: a client of the admin API, nothing else.
// The admin token lives in this tab's session storage, never in a URL.
// Pages are built with DOM calls (h below), never from HTML strings, so
// nothing an event carries can run as code here.
'use strict';

const TOKEN_KEY = 'hookinbox.admin_token';
const REFRESH_MS = 10000;
const STATUSES = ['pending', 'held', 'delivered', 'dead', 'ignored', 'filtered'];

// Who is signed in (GET /api/whoami): { name, role, expires }.
let me = null;
const RANKS = { viewer: 0, operator: 1, admin: 2 };

// Whether the person signed in has `role` or a higher one: the buttons of
// a change their role may not make are not built at all.
function can(role) {
  return me !== null && RANKS[me.role] >= RANKS[role];
}

const view = document.getElementById('view');
const nav = document.getElementById('nav');
const flashBox = document.getElementById('flash');
let timers = [];

// ---- building blocks ----------------------------------------------------

// Whether `value` is nothing to show: what `cond ? node : null` or
// `can(role) && node` gives when it does not apply.
function absent(value) {
  return value === null || value === undefined || value === false;
}

// `children` (arrays of them flattened) as nodes, the absent ones left
// out: the DOM's own `append` and `replaceChildren` would show those as
// the text "null", "false" or "undefined".
function nodes(children) {
  return children.flat().filter((child) => !absent(child))
    .map((child) => (child instanceof Node ? child : document.createTextNode(String(child))));
}

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (absent(value)) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'text') el.textContent = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  el.append(...nodes(children));
  return el;
}

// Replaces what `el` holds with `children`, as `h` takes them. Every page
// is shown through it, never through `el.replaceChildren` itself.
function fill(el, ...children) {
  el.replaceChildren(...nodes(children));
}

function flash(message, bad) {
  flashBox.textContent = message;
  flashBox.className = bad ? 'bad' : '';
}

// What a page left running (timers, event streams): each a function that
// stops it, called when the page changes.
function stopTimers() {
  timers.forEach((stop) => stop());
  timers = [];
}

function every(ms, fn) {
  const id = setInterval(() => fn().catch(showError), ms);
  timers.push(() => clearInterval(id));
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
    // An expired token is told apart: the server says whose and since when.
    showSignIn(data && data.reason && data.reason.includes('expired')
      ? `hookinbox refused that token: ${data.reason}.`
      : 'hookinbox did not accept that admin token. Check it and sign in again ' +
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

// Follows GET /api/events/stream with `query` until stopped: `onEvent`
// gets each event's data as it is stored, `onState` true while connected
// and false while reconnecting. fetch() and not EventSource, which cannot
// send the token in a header (and it never goes in a URL). A break is
// resumed with Last-Event-ID: nothing stored meanwhile is missed.
// Returns the function that stops it (also registered with the page's).
function follow(query, onEvent, onState) {
  const controller = new AbortController();
  let lastId = null;
  let stopped = false;
  const stop = () => { stopped = true; controller.abort(); };
  timers.push(stop);
  const dispatch = (block) => {
    let kind = 'message';
    let id = null;
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') kind = value;
      else if (field === 'id') id = value;
      else if (field === 'data') data.push(value);
    }
    if (id !== null) lastId = id;
    if (kind === 'event' && data.length) onEvent(JSON.parse(data.join('\n')));
  };
  (async () => {
    let wait = 500;
    while (!stopped) {
      try {
        const headers = { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY) || ''}` };
        if (lastId !== null) headers['Last-Event-ID'] = lastId;
        const response = await fetch(`/api/events/stream?${query}`, {
          headers, cache: 'no-store', signal: controller.signal,
        });
        if (response.status === 401 || response.status === 400) {
          // What asking again cannot cure: api() says it (and signs out on 401).
          await api('GET', `/api/events/stream?${query}`);
          return;
        }
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        onState(true);
        wait = 500;
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer = (buffer + value).replace(/\r\n?/g, '\n');
          let end;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            dispatch(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
      } catch (e) {
        if (stopped) return;
        if (e instanceof ApiFailure) { showError(e); return; }
      }
      if (stopped) return;
      onState(false);
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 5000);
    }
  })();
  return stop;
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
      if (!token) { problem.textContent = 'Paste your token first.'; return; }
      sessionStorage.setItem(TOKEN_KEY, token);
      try {
        me = null;
        await whoami();
        route();
      } catch (e) { if (e.status !== 401) problem.textContent = e.message; }
    },
  },
  h('label', {}, 'Token', input),
  h('button', { type: 'submit', text: 'Sign in' }),
  problem);
  fill(view, h('section', { class: 'signin' },
    h('h1', { text: 'Sign in to hookinbox' }),
    h('p', { class: 'muted', text: 'The token stays in this browser tab only and is sent to this server alone.' }),
    form));
  input.focus();
}

// Learns who the token belongs to, once a sign-in, and says so in the
// header.
async function whoami() {
  if (me !== null) return;
  me = await api('GET', '/api/whoami');
  const who = document.getElementById('who');
  who.textContent = `${me.name} (${me.role})`;
  who.title = me.expires ? `Signed in until ${fmtTime(me.expires)}` : 'Signed in';
}

async function route() {
  stopTimers();
  if (!sessionStorage.getItem(TOKEN_KEY)) { showSignIn(); return; }
  try { await whoami(); } catch (e) { showError(e); return; }
  nav.hidden = false;
  const [path, query] = (location.hash || '#/').slice(1).split('?');
  const params = new URLSearchParams(query || '');
  let page = 'overview';
  let show = () => overview(params);
  if (path === '/events') { page = 'events'; show = () => events(params); }
  else if (path.startsWith('/event/')) { page = 'events'; show = () => detail(decodeURIComponent(path.slice(7))); }
  else if (path === '/dlq') { page = 'dlq'; show = () => dlq(params); }
  else if (path === '/shapes') { page = 'shapes'; show = () => shapes(params); }
  else if (path === '/keys') { page = 'keys'; show = () => keys(); }
  else if (path === '/audit') { page = 'audit'; show = () => audit(params); }
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  fill(view, h('p', { class: 'muted', text: 'Loading…' }));
  // Keyboard and screen-reader users land on the new page, not the link.
  show().then(() => {
    if (!view.contains(document.activeElement)) view.focus({ preventScroll: true });
  }).catch(showError);
}
