// Idempotency keys: per configured namespace, the keys claimed now (busy)
// and those whose lease ran out before a complete (claimable again).
// Part of app.js: the parts are joined in order (src/dashboard/mod.rs).

// ---- keys ---------------------------------------------------------------------------

// Pages of claimed keys read per namespace (500 keys at most each; a page
// may be short when the namespace holds many done keys).
const KEY_PAGES = 10;

// Every claimed key of `namespace`, and whether more are left unread.
async function claimedKeys(namespace) {
  const keys = [];
  let after = null;
  for (let i = 0; i < KEY_PAGES; i++) {
    const query = new URLSearchParams({ namespace, state: 'claimed', limit: '500' });
    if (after !== null) query.set('after', after);
    const page = await api('GET', `/api/keys?${query}`);
    keys.push(...page.keys);
    after = page.next_after;
    if (after === null) return { keys, more: false };
  }
  return { keys, more: true };
}

function keyRow(k, now, busy) {
  const until = Date.parse(k.lease_until);
  return h('tr', { 'data-key': k.key },
    h('td', { class: 'mono wrap', text: k.key }),
    h('td', { class: 'num', text: k.token }),
    h('td', { class: 'time mono', text: fmtTime(k.lease_until) }),
    h('td', { class: 'num', text: busy ? `in ${fmtAge(until - now)}` : `${fmtAge(now - until)} ago` }),
    h('td', { class: 'num', text: k.claims }),
    h('td', { class: 'time mono hide-narrow', text: fmtTime(k.created_at) }));
}

function keyTable(label, id, list, now, busy) {
  return table(label, ['Key', h('th', { scope: 'col', class: 'num', text: 'Token' }), 'Lease until',
    h('th', { scope: 'col', class: 'num', text: busy ? 'Lease ends' : 'Lease ran out' }),
    h('th', { scope: 'col', class: 'num', text: 'Claims' }),
    h('th', { scope: 'col', class: 'hide-narrow', text: 'Created' })],
  list.map((k) => keyRow(k, now, busy)), { id });
}

async function keys() {
  const body = h('div');
  fill(view,
    h('h1', { text: 'Idempotency keys' }),
    h('p', { class: 'muted', text: 'Keys an app has claimed and not completed, per namespace: busy while the lease runs, ' +
      'claimable again once it ran out (the worker may have crashed). Done keys are not listed.' }),
    body);
  const render = async () => {
    const { namespaces } = await api('GET', '/api/key-namespaces');
    const lists = await Promise.all(namespaces.map((n) => claimedKeys(n.namespace)));
    if (document.querySelector('dialog[open]')) return;
    const now = Date.now();
    const focused = focusKey(body);
    const sections = namespaces.map((n, i) => {
      const { keys: claimed, more } = lists[i];
      const busy = claimed.filter((k) => Date.parse(k.lease_until) > now);
      const lapsed = claimed.filter((k) => Date.parse(k.lease_until) <= now);
      return h('section', { 'aria-labelledby': `ns-${i}`, 'data-namespace': n.namespace },
        h('h2', { id: `ns-${i}`, text: `Namespace ${n.namespace}` }),
        h('p', { class: 'muted', text: `Apps: ${n.clients.join(', ')}. ${plural(busy.length, 'busy key')}, ` +
          `${plural(lapsed.length, 'key')} whose lease ran out.` }),
        h('h3', { text: 'Busy' }),
        busy.length
          ? keyTable(`Busy keys of ${n.namespace}`, `keys-busy-${i}`, busy, now, true)
          : h('p', { class: 'muted', id: `keys-busy-${i}-empty`, text: 'No key is claimed now.' }),
        h('h3', { text: 'Lease ran out' }),
        lapsed.length
          ? keyTable(`Keys of ${n.namespace} whose lease ran out`, `keys-lapsed-${i}`, lapsed, now, false)
          : h('p', { class: 'muted', id: `keys-lapsed-${i}-empty`, text: 'None.' }),
        more ? h('p', { class: 'muted', text: `More claimed keys may follow: this page reads ${KEY_PAGES} pages a namespace. ` +
          `hookinbox keys list --namespace ${n.namespace} --state claimed --all lists every one.` }) : null);
    });
    fill(body,
      ...(sections.length ? sections : [h('p', { class: 'muted', id: 'keys-none',
        text: 'No [[keys.client]] is configured: no app uses idempotency keys.' })]),
      h('p', { class: 'muted', text: `Updated ${fmtTime(new Date(now).toISOString())}; refreshes every ${REFRESH_MS / 1000} s.` }));
    restoreFocus(body, focused);
  };
  await render();
  every(REFRESH_MS, render);
}
