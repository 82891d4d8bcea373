// Delegations: the background work, live, as trees (a delegation, its
// sub-agents, an orchestrator's workers) with each one's status, current
// tool, tokens and cost; a sub-agent's transcript, live; stop one, or a
// whole delegation.
const DELEGATION_ENDED = ['completed', 'failed', 'interrupted', 'cancelled', 'timed_out', 'stalled', 'unknown', 'rejected'];

pages.delegations = function delegations(root) {
  root.append(h('h1', {}, 'Delegations'));
  const conv = h('input', { id: 'deleg-conv', placeholder: 'conversation (all when empty)' });
  const active = h('input', { id: 'deleg-active', type: 'checkbox' });
  const form = h('form', { class: 'inline', id: 'deleg-filter' },
    conv, h('label', {}, active, ' only those still running'), h('button', { type: 'submit' }, 'Show'));
  const msg = h('p', { role: 'status', id: 'deleg-msg' });
  root.append(form, msg);
  const list = section(root, 'Delegations');
  const drawer = h('aside', { class: 'drawer', id: 'deleg-drawer', hidden: true });
  root.append(drawer);

  const path = id => '/api/v1/delegations/' + encodeURIComponent(id);
  const childPath = b => path(b.delegation_id) + '/children/' + encodeURIComponent(b.id);
  const running = s => !DELEGATION_ENDED.includes(s);
  const act = async (what, url, done) => {
    try {
      const d = await call('POST', url);
      msg.textContent = d.stopping && d.stopping.length ? done + ': ' + what : what + ' had ended; nothing to stop';
    } catch (e) {
      if (!(e instanceof NotSignedIn)) msg.textContent = 'Not stopped: ' + e.message;
    }
  };
  const stop = (e, url, what) => {
    e.stopPropagation(); // not the row's click, which opens the transcript
    act(what, url, 'Stopping');
  };

  // The transcript of one sub-agent, live, in the drawer.
  let stopTranscript = () => {};
  const closeTranscript = () => { stopTranscript(); stopTranscript = () => {}; drawer.hidden = true; };
  const openTranscript = b => {
    stopTranscript();
    const out = h('pre', { class: 'output', id: 'deleg-transcript' }, 'Loading…');
    drawer.replaceChildren(
      h('button', { type: 'button', class: 'close', onclick: closeTranscript }, 'Close'),
      h('h2', {}, 'Transcript of ' + b.id), h('p', { class: 'text muted' }, b.goal), out);
    drawer.hidden = false;
    drawer.dataset.id = b.id;
    stopTranscript = watch(childPath(b) + '/transcript', d => {
      const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
      out.textContent = (d.truncated ? '… (its start is left out)\n' : '') + d.transcript;
      if (atEnd) out.scrollTop = out.scrollHeight;
    }, e => out.replaceChildren(failure(e)));
  };

  const cost = b => (typeof b.cost_usd === 'number' ? '$' + b.cost_usd.toFixed(4) : '-');
  // rows are a sub-agent's row and its workers', depth deep.
  const rows = (b, depth) => [h('tr', {
    class: 'child' + (b.delegation_id ? ' open' : ''), 'data-id': b.id,
    onclick: b.delegation_id ? () => openTranscript(b) : null,
  },
  h('td', { class: 'agent depth' + Math.min(depth, 4) }, (depth ? '└ ' : '') + b.id),
  h('td', { class: 'text' }, b.goal),
  h('td', {}, h('span', { class: 'status status-' + b.status }, b.status), running(b.status) && b.delegation_id
    ? h('button', { type: 'button', 'data-action': 'stop', 'data-id': b.id, onclick: e => stop(e, childPath(b) + '/stop', b.id) }, 'Stop')
    : null),
  h('td', { class: 'tool' }, running(b.status) ? (b.current_tool || (b.status === 'running' ? 'thinking' : '-')) : '-'),
  h('td', {}, String(b.api_calls || 0)),
  h('td', { title: (b.input_tokens || 0) + ' in, ' + (b.output_tokens || 0) + ' out' }, String(b.tokens || 0)),
  h('td', {}, cost(b)),
  h('td', {}, when(b.started_at)), h('td', {}, when(b.ended_at)),
  h('td', { class: 'text' + (b.error ? ' error' : '') }, b.error || b.summary || '-')),
  ...(b.workers || []).flatMap(w => rows(w, depth + 1))];

  const tree = d => h('div', { class: 'deleg', 'data-id': d.id },
    h('h3', {},
      h('span', {}, d.id), ' ', h('span', { class: 'status status-' + d.status }, d.status),
      h('small', { class: 'muted' }, ' ' + d.conv + ' · ' + (d.orchestrator ? 'workers of ' + d.orchestrator : d.source) +
        ' · ' + d.done + ' of ' + d.total + ' done · ' + when(d.created_at)),
      running(d.status)
        ? h('button', { type: 'button', 'data-action': 'stop-all', 'data-id': d.id, onclick: e => stop(e, path(d.id) + '/cancel', d.id) }, 'Stop all')
        : null),
    h('table', {},
      h('thead', {}, h('tr', {}, ['Sub-agent', 'Goal', 'Status', 'Current tool', 'API calls', 'Tokens', 'Cost', 'Started', 'Ended', 'Result']
        .map(c => h('th', {}, c)))),
      h('tbody', {}, d.children.flatMap(b => rows(b, 0)))));

  let stopList = () => {};
  const show = () => {
    stopList();
    const q = new URLSearchParams();
    if (conv.value.trim()) q.set('conversation', conv.value.trim());
    if (active.checked) q.set('active', '1');
    const qs = q.toString();
    stopList = follow(list, '/api/v1/delegations' + (qs ? '?' + qs : ''), d => (d.delegations.length
      ? h('div', { id: 'deleg-list' }, d.delegations.map(tree))
      : h('p', { class: 'muted' }, 'No delegations.')));
  };
  form.addEventListener('submit', e => { e.preventDefault(); show(); });
  show();
  return () => { stopList(); stopTranscript(); };
};
