// Kanban: a board's cards by column, live on the board's events.
const STATUSES = ['triage', 'todo', 'scheduled', 'ready', 'running', 'blocked', 'review', 'done'];

// The kinds of a board's events (kanban's Event* constants; a test
// checks the list): the stream names each, so each needs its listener.
const KANBAN_EVENTS = ['created', 'moved', 'claimed', 'spawned', 'completed', 'blocked', 'unblocked',
  'gave_up', 'crashed', 'timed_out', 'reclaimed', 'rate_limited', 'review_requested', 'approved',
  'changes_requested', 'commented', 'attached', 'linked', 'unlinked', 'assigned', 'prioritized',
  'promoted', 'archived', 'check_failed', 'skipped_unassigned', 'skipped_nonspawnable', 'stranded_in_ready',
  'edited', 'stop_requested'];

pages.kanban = function kanban(root) {
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
  // open shows a card in the drawer: what was said on it, its
  // attachments, its runs and the tail of its log.
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
        h('h3', {}, 'Attachments'),
        table([['Name', a => h('a', { href: '/api/v1/kanban/cards/' + encodeURIComponent(c.id) + '/attachments/' + encodeURIComponent(a.name), download: a.name }, a.name)],
          ['Size', a => a.size + ' B'], ['Added', a => when(a.created_at)], ['By', a => a.created_by || '-']], c.attachments || [], 'No attachments.'),
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
};
