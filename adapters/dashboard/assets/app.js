// herald's dashboard: one page per hash route, reading /api/v1 with the
// session cookie. Text from the server is only ever set as text.
'use strict';

const REFRESH_MS = 10000; // the slowest a page may poll is every 5 s
const STATUSES = ['triage', 'todo', 'scheduled', 'ready', 'running', 'blocked', 'review', 'done'];

// The kinds of a board's events (kanban's Event* constants; a test
// checks the list): the stream names each, so each needs its listener.
const KANBAN_EVENTS = ['created', 'moved', 'claimed', 'spawned', 'completed', 'blocked', 'unblocked',
  'gave_up', 'crashed', 'timed_out', 'reclaimed', 'rate_limited', 'review_requested', 'approved',
  'changes_requested', 'commented', 'attached', 'linked', 'unlinked', 'assigned', 'prioritized',
  'promoted', 'archived', 'check_failed', 'skipped_unassigned', 'skipped_nonspawnable', 'stranded_in_ready',
  'edited', 'stop_requested'];

let stopPage = () => {}; // ends the current page's timers and streams

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function csrfToken() {
  const m = document.cookie.match(/(?:^|;\s*)herald_csrf=([^;]*)/);
  return m ? decodeURIComponent(m[1]) : '';
}

class NotSignedIn extends Error {}

async function call(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (method !== 'GET') opts.headers['X-Herald-CSRF'] = csrfToken();
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const data = await r.json().catch(() => ({}));
  if (r.status === 401) {
    showLogin();
    throw new NotSignedIn('sign in first');
  }
  if (!r.ok) {
    const msg = data.error && (data.error.message || data.error);
    throw new Error(r.status === 404 && !msg ? 'not served by this gateway' : (msg || r.statusText));
  }
  return data;
}

function when(t) {
  if (!t || t.startsWith('0001-')) return '-';
  return new Date(t).toLocaleString();
}

function table(columns, rows, empty) {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', {},
    h('thead', {}, h('tr', {}, columns.map(c => h('th', {}, c[0])))),
    h('tbody', {}, rows.map(r => h('tr', { 'data-id': r.id || '' },
      columns.map(c => { const v = c[1](r); return h('td', { class: c[2] || '' }, v); })))));
}

function failure(err) {
  return h('p', { class: 'error', role: 'alert' }, String(err.message || err));
}

// every runs load now and then each REFRESH_MS, until the page changes.
function every(load) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    try { await load(); } catch (e) { if (!(e instanceof NotSignedIn)) console.warn(e); }
    if (!stopped) timer = setTimeout(tick, REFRESH_MS);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

// section returns a titled part of the page whose body fill replaces.
function section(root, title) {
  const body = h('div', {});
  root.append(h('h2', {}, title), body);
  return {
    set(...nodes) { body.replaceChildren(...nodes); },
    async fill(f) {
      try { body.replaceChildren(await f()); } catch (e) {
        if (!(e instanceof NotSignedIn)) body.replaceChildren(failure(e));
      }
    },
  };
}

const pages = {
  '': overview,
  conversations, delegations, cron, kanban, outbox, keys, approvals,
};

function overview(root) {
  root.append(h('h1', {}, 'Overview'));
  const stats = h('div', { class: 'cards', id: 'stats' });
  root.append(stats);
  const counts = [
    ['Outbox pending', '#/outbox', () => call('GET', '/api/v1/outbox/pending').then(d => d.messages.length)],
    ['Dead letters', '#/outbox', () => call('GET', '/api/v1/outbox/dead').then(d => d.messages.length)],
    ['Approvals pending', '#/approvals', () => call('GET', '/api/v1/approvals').then(d => d.approvals.length)],
    ['Cron jobs', '#/cron', () => call('GET', '/api/v1/cron/jobs').then(d => d.jobs.length)],
    ['Kanban boards', '#/kanban', () => call('GET', '/api/v1/kanban/boards').then(d => d.boards.length)],
  ];
  return every(async () => {
    const tiles = await Promise.all(counts.map(async ([label, href, count]) => {
      let value;
      try { value = await count(); } catch (e) {
        if (e instanceof NotSignedIn) throw e;
        value = '–';
      }
      return h('a', { class: 'stat', href }, h('b', {}, value), label);
    }));
    stats.replaceChildren(...tiles);
  });
}

function outbox(root) {
  root.append(h('h1', {}, 'Outbox'));
  const msg = h('p', { role: 'status' });
  root.append(msg);
  const pending = section(root, 'Pending');
  const dead = section(root, 'Dead letters');
  const text = m => (m.files && m.files.length ? '[' + m.files.join(', ') + '] ' : '') + m.text;
  const retry = async (id, button) => {
    button.disabled = true;
    try {
      await call('POST', '/api/v1/outbox/dead/' + encodeURIComponent(id) + '/retry');
      msg.textContent = id + ' is pending again';
      await load();
    } catch (e) {
      msg.textContent = 'Retry failed: ' + e.message;
      button.disabled = false;
    }
  };
  const load = () => Promise.all([
    pending.fill(async () => table([
      ['ID', m => m.id], ['Target', m => m.target], ['Attempts', m => m.attempts],
      ['Next attempt', m => when(m.next_attempt)], ['Text', text, 'text'], ['Last error', m => m.last_error || '-', 'text'],
    ], (await call('GET', '/api/v1/outbox/pending')).messages, 'Nothing waits to be sent.')),
    dead.fill(async () => table([
      ['ID', m => m.id], ['Target', m => m.target], ['Attempts', m => m.attempts],
      ['Text', text, 'text'], ['Reason', m => m.last_error || '-', 'text'],
      ['', m => { const b = h('button', { type: 'button', class: 'retry' }, 'Retry'); b.addEventListener('click', () => retry(m.id, b)); return b; }],
    ], (await call('GET', '/api/v1/outbox/dead')).messages, 'No dead letters.')),
  ]);
  return every(load);
}

const DECISIONS = [['once', 'Allow once'], ['session', 'Allow this session'], ['always', 'Always allow'], ['deny', 'Deny']];

function approvals(root) {
  root.append(h('h1', {}, 'Approvals'));
  const msg = h('p', { role: 'status' });
  root.append(msg);
  const list = section(root, 'Pending');
  const decide = async (a, d, label) => {
    try {
      await call('POST', '/api/v1/approvals/' + encodeURIComponent(a.id), { decision: d });
      msg.textContent = label + ': ' + a.tool + ' (' + a.id + ')';
    } catch (e) {
      msg.textContent = 'Not answered: ' + e.message;
    }
    await load();
  };
  const load = () => list.fill(async () => table([
    ['Conversation', a => a.conv], ['Tool', a => a.tool], ['Action', a => a.action, 'text'],
    ['Reason', a => a.reason, 'text'],
    ['Decision', a => h('span', {}, DECISIONS.map(([d, label]) =>
      h('button', { type: 'button', 'data-decision': d, onclick: () => decide(a, d, label) }, label)))],
  ], (await call('GET', '/api/v1/approvals')).approvals, 'No approval is waiting.'));
  return every(load);
}

function kanban(root) {
  root.append(h('h1', {}, 'Kanban'));
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const board = params.get('board') || 'default';
  const picker = h('select', { id: 'board', onchange: e => { location.hash = '#/kanban?board=' + encodeURIComponent(e.target.value); } });
  const title = h('input', { id: 'card-title', placeholder: 'New card title', required: true, maxlength: 200 });
  const msg = h('span', { role: 'status' });
  const form = h('form', { class: 'inline', id: 'new-card' }, picker, title, h('button', { type: 'submit' }, 'Create card'), msg);
  const live = h('span', { class: 'muted', id: 'live' }, 'connecting…');
  const columns = h('div', { class: 'board', id: 'columns' });
  root.append(form, live, columns);

  call('GET', '/api/v1/kanban/boards').then(d => {
    picker.replaceChildren(...d.boards.map(b => h('option', { value: b.slug, selected: b.slug === board }, b.slug)));
  }).catch(e => { if (!(e instanceof NotSignedIn)) msg.textContent = e.message; });

  const drawer = h('aside', { class: 'drawer', id: 'drawer', hidden: true });
  root.append(drawer);

  const path = '/api/v1/kanban/boards/' + encodeURIComponent(board);
  // A card dropped on another column is moved there with the API's PATCH;
  // the board refuses a move its state does not allow, and says why.
  // A block needs a reason, which the page asks for.
  const move = async (id, to) => {
    const patch = { status: to };
    if (to === 'blocked') {
      const reason = window.prompt('Why is ' + id + ' blocked?');
      if (!reason) return;
      patch.reason = reason;
    }
    try {
      const c = await call('PATCH', '/api/v1/kanban/cards/' + encodeURIComponent(id), patch);
      msg.textContent = 'Moved ' + c.id + ' to ' + c.status;
    } catch (e) {
      if (!(e instanceof NotSignedIn)) msg.textContent = 'Not moved: ' + e.message;
    }
    await load();
  };
  const column = st => h('div', {
    class: 'column', 'data-status': st,
    ondragover: e => { e.preventDefault(); e.currentTarget.classList.add('over'); },
    ondragleave: e => e.currentTarget.classList.remove('over'),
    ondrop: e => {
      e.preventDefault();
      e.currentTarget.classList.remove('over');
      const id = e.dataTransfer.getData('text/plain');
      if (id) move(id, st);
    },
  }, h('h2', {}, st));
  const card = c => h('div', {
    class: 'card', 'data-id': c.id, draggable: 'true', tabindex: '0',
    ondragstart: e => { e.dataTransfer.setData('text/plain', c.id); e.dataTransfer.effectAllowed = 'move'; },
    onclick: () => open(c.id),
    onkeydown: e => { if (e.key === 'Enter') open(c.id); },
  }, c.title, h('small', {}, c.id + (c.assignee ? ' · ' + c.assignee : '')));
  const load = async () => {
    try {
      const cards = (await call('GET', path + '/cards')).cards;
      columns.replaceChildren(...STATUSES.map(st => {
        const col = column(st);
        col.append(...cards.filter(c => c.status === st).map(card));
        return col;
      }));
    } catch (e) {
      if (!(e instanceof NotSignedIn)) columns.replaceChildren(failure(e));
    }
  };
  // open shows a card in the drawer: what was said on it, its runs and
  // the tail of its log.
  const open = async id => {
    drawer.hidden = false;
    drawer.replaceChildren(h('p', { class: 'muted' }, 'Loading ' + id + '…'));
    try {
      const c = await call('GET', '/api/v1/kanban/cards/' + encodeURIComponent(id));
      drawer.replaceChildren(
        h('button', { type: 'button', class: 'close', onclick: () => { drawer.hidden = true; } }, 'Close'),
        h('h2', {}, c.title), h('p', { class: 'muted' }, c.id + ' · ' + c.status + (c.assignee ? ' · ' + c.assignee : '')),
        ...(c.body ? [h('p', { class: 'text' }, c.body)] : []),
        h('h3', {}, 'Comments'),
        table([['At', m => when(m.at)], ['Author', m => m.author || '-'], ['Text', m => m.text, 'text']], c.comments || [], 'No comments.'),
        h('h3', {}, 'Runs'),
        table([['Run', r => r.id], ['Lane', r => r.lane || '-'], ['Started', r => when(r.started_at)], ['Ended', r => when(r.ended_at)],
          ['Outcome', r => r.outcome || '-'], ['Summary', r => r.error || r.summary || '-', 'text']], c.runs || [], 'No runs.'),
        h('h3', {}, 'Log'),
        table([['At', ev => when(ev.at)], ['Event', ev => ev.kind + (ev.to && ev.to !== ev.kind ? ' → ' + ev.to : '')], ['By', ev => ev.actor || '-'],
          ['Text', ev => ev.text || '', 'text']], (c.events || []).slice(-20).reverse(), 'Nothing logged.'));
    } catch (e) {
      if (!(e instanceof NotSignedIn)) drawer.replaceChildren(failure(e));
    }
  };
  form.addEventListener('submit', async e => {
    e.preventDefault();
    try {
      const c = await call('POST', path + '/cards', { title: title.value });
      msg.textContent = 'Created ' + c.id;
      title.value = '';
      await load();
    } catch (err) {
      msg.textContent = 'Not created: ' + err.message;
    }
  });

  // The board's events say when to read it again; a burst is one read.
  let pending = null;
  const soon = () => { if (!pending) pending = setTimeout(() => { pending = null; load(); }, 200); };
  const events = new EventSource(path + '/events', { withCredentials: true });
  events.onopen = () => { live.textContent = 'live'; };
  events.onerror = () => { live.textContent = 'reconnecting…'; };
  events.onmessage = soon;
  for (const kind of KANBAN_EVENTS) {
    events.addEventListener(kind, soon);
  }
  load();
  return () => { events.close(); clearTimeout(pending); };
}

function cron(root) {
  root.append(h('h1', {}, 'Cron'));
  const msg = h('p', { role: 'status', id: 'cron-msg' });
  root.append(msg);
  const list = section(root, 'Jobs');
  const detail = h('div', { id: 'cron-runs' });
  root.append(detail);
  const jobPath = id => '/api/v1/cron/jobs/' + encodeURIComponent(id);
  let shown = null; // the job whose runs are shown
  const act = async (j, action, done) => {
    try {
      await call('POST', jobPath(j.id) + '/' + action);
      msg.textContent = done + ': ' + j.name + ' (' + j.id + ')';
    } catch (e) {
      if (!(e instanceof NotSignedIn)) msg.textContent = 'Not done: ' + e.message;
    }
    await load();
  };
  const output = async (j, r, into) => {
    try {
      into.replaceChildren(h('pre', { class: 'output' }, (await call('GET', jobPath(j.id) + '/runs/' + encodeURIComponent(r.id) + '/output')).output));
    } catch (e) {
      if (!(e instanceof NotSignedIn)) into.replaceChildren(failure(e));
    }
  };
  const runs = async j => {
    const d = await call('GET', jobPath(j.id));
    const out = h('div', { id: 'cron-output' });
    return [h('h2', {}, 'Runs of ' + d.name), table([
      ['Run', r => r.id], ['Started', r => when(r.started_at)], ['Ended', r => when(r.ended_at)],
      ['Status', r => r.status + (r.manual ? ' (run now)' : '')], ['Delivery', r => r.delivery || '-'],
      ['Error', r => r.error || r.delivery_error || '-', 'text'],
      ['', r => r.output ? h('button', { type: 'button', class: 'output', onclick: () => output(j, r, out) }, 'Output') : '-'],
    ], d.runs || [], 'No runs yet.'), out];
  };
  const load = () => list.fill(async () => {
    const jobs = (await call('GET', '/api/v1/cron/jobs')).jobs;
    if (shown && !jobs.some(j => j.id === shown.id)) {
      shown = null;
      detail.replaceChildren();
    }
    return table([
      ['ID', j => j.id], ['Name', j => j.name], ['State', j => j.state], ['Enabled', j => j.enabled ? 'yes' : 'no'],
      ['Next run', j => when(j.next_run_at)], ['Prompt', j => j.prompt || j.script || '-', 'text'],
      ['', j => h('span', {},
        h('button', { type: 'button', 'data-action': 'run', onclick: () => act(j, 'run', 'Run requested') }, 'Run now'),
        j.enabled
          ? h('button', { type: 'button', 'data-action': 'pause', onclick: () => act(j, 'pause', 'Paused') }, 'Pause')
          : h('button', { type: 'button', 'data-action': 'resume', onclick: () => act(j, 'resume', 'Resumed') }, 'Resume'),
        h('button', { type: 'button', 'data-action': 'runs', onclick: () => { shown = j; showRuns(); } }, 'Runs'))],
    ], jobs, 'No scheduled jobs.');
  });
  const showRuns = async () => {
    try { detail.replaceChildren(...await runs(shown)); } catch (e) {
      if (!(e instanceof NotSignedIn)) detail.replaceChildren(failure(e));
    }
  };
  return every(load);
}

// lookup is a page that shows one thing the API finds by id.
function lookup(root, title, label, show) {
  root.append(h('h1', {}, title));
  const input = h('input', { placeholder: label, required: true });
  const out = h('div', {});
  const form = h('form', { class: 'inline' }, input, h('button', { type: 'submit' }, 'Show'));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    try { out.replaceChildren(await show(input.value.trim())); } catch (err) {
      if (!(err instanceof NotSignedIn)) out.replaceChildren(failure(err));
    }
  });
  root.append(form, out);
  return () => {};
}

function conversations(root) {
  return lookup(root, 'Conversations', 'API conversation id', async id => table([
    ['At', i => when(i.at)], ['Kind', i => i.kind || '-'], ['Text', i => i.text, 'text'],
  ], (await call('GET', '/api/v1/conversations/' + encodeURIComponent(id) + '/timeline')).items, 'Nothing was sent to this conversation.'));
}

function delegations(root) {
  return lookup(root, 'Delegations', 'delegation id', async id => {
    const d = await call('GET', '/api/v1/delegations/' + encodeURIComponent(id));
    return table([['Field', r => r.id], ['Value', r => r.v, 'text']],
      Object.entries(d).map(([k, v]) => ({ id: k, v: typeof v === 'object' ? JSON.stringify(v) : v })), '');
  });
}

function keys(root) {
  root.append(h('h1', {}, 'Keys'),
    h('p', { class: 'muted' }, 'The API keys of the model and its fallbacks, masked, as every gateway on the store sees them. herald model keys --revive ID clears a mark.'));
  const list = section(root, 'Model keys');
  return every(() => list.fill(async () => table([
    ['Model', k => k.model], ['ID', k => k.id], ['Key', k => k.key], ['Label', k => k.label || '-'],
    ['Priority', k => k.priority], ['Status', k => k.status, 'status'], ['Cooling until', k => when(k.cooling_until)],
    ['Reason', k => k.reason || '-'], ['Uses', k => k.uses],
  ], (await call('GET', '/api/v1/model/keys')).keys, 'The model has no keys.')));
}

function route() {
  stopPage();
  const name = location.hash.replace(/^#\/?/, '').split('?')[0];
  const page = pages[name] || overview;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.getAttribute('href') === '#/' + (pages[name] ? name : ''));
  }
  const root = document.getElementById('page');
  root.replaceChildren();
  root.dataset.page = name || 'overview';
  stopPage = page(root) || (() => {});
}

function showLogin() {
  stopPage();
  stopPage = () => {};
  document.getElementById('page').replaceChildren();
  document.getElementById('nav').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('login').hidden = false;
  document.getElementById('key').focus();
}

function showApp(loginRequired) {
  document.getElementById('login').hidden = true;
  document.getElementById('nav').hidden = false;
  document.getElementById('logout').hidden = !loginRequired;
  route();
}

async function start() {
  const login = document.getElementById('login');
  login.addEventListener('submit', async e => {
    e.preventDefault();
    const key = document.getElementById('key');
    const error = document.getElementById('login-error');
    const r = await fetch('/ui/login', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ key: key.value }),
    });
    key.value = '';
    if (!r.ok) {
      error.textContent = (await r.json().catch(() => ({}))).error || 'Sign-in failed.';
      return;
    }
    error.textContent = '';
    showApp(true);
  });
  document.getElementById('logout').addEventListener('click', async () => {
    await fetch('/ui/logout', { method: 'POST', credentials: 'same-origin' });
    showLogin();
  });
  window.addEventListener('hashchange', () => { if (document.getElementById('login').hidden) route(); });
  const st = await (await fetch('/ui/session', { credentials: 'same-origin' })).json();
  if (st.signed_in) showApp(st.login_required); else showLogin();
}

start();
