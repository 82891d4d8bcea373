// Conversations: every conversation by its last activity, live; one
// (#/conversations?key=telegram:42) with its queue, its controllers and
// its timeline, live.
pages.conversations = function conversations(root) {
  root.append(h('h1', {}, 'Conversations'));
  const key = new URLSearchParams(location.hash.split('?')[1] || '').get('key');
  const link = k => '#/conversations?key=' + encodeURIComponent(k);
  const input = h('input', { placeholder: 'conversation key (telegram:42) or API conversation id', required: true, id: 'conv-key' });
  const form = h('form', { class: 'inline' }, input, h('button', { type: 'submit' }, 'Show'));
  form.addEventListener('submit', e => {
    e.preventDefault();
    const k = input.value.trim();
    location.hash = link(k.includes(':') ? k : 'api:' + k);
  });
  root.append(form);
  const tokens = c => {
    if (!c.tokens_in && !c.tokens_out) return '-';
    const n = x => x.toLocaleString();
    return n(c.tokens_in) + ' in / ' + n(c.tokens_out) + ' out' + (c.cost != null ? ' ($' + c.cost.toFixed(4) + ')' : '');
  };
  const running = c => c.running ? 'on ' + c.worker + ' until ' + when(c.expires) : '-';

  const stops = [];
  if (key) {
    const queue = section(root, 'Conversation ' + key);
    const ctl = section(root, 'Controllers');
    const timeline = section(root, 'Timeline');
    timeline.set(h('p', { class: 'muted' }, 'Reading…'));
    const stop = watch('/api/v1/conversations/' + encodeURIComponent(key), d => {
      const c = d.conversation;
      const field = (name, f) => x => h('span', { 'data-field': name }, f(x));
      queue.set(h('div', { id: 'conv-queue' }, table([
        ['Queued', field('queued', x => x.queued)], ['Turn running', field('running', running)],
        ['Last activity', x => when(x.last_active)], ['Tokens', tokens],
      ], [c])));
      ctl.set(table([
        ['Controller', s => s.kind + (s.id ? ' ' + s.id : '')], ['Next', s => when(s.due_at)],
        ['Updated', s => when(s.updated_at)], ['State', s => JSON.stringify(s.data), 'text'],
      ], d.controllers, 'No goal, loop or heartbeat.'));
      const shown = d.history.length < d.history_total
        ? h('p', { class: 'muted' }, 'The last ' + d.history.length + ' of ' + d.history_total + ' messages.') : null;
      timeline.set(shown || '', h('div', { id: 'conv-timeline' }, table([
        ['At', m => when(m.at)], ['Role', m => m.role + (m.name ? ' (' + m.name + ')' : '')],
        ['Text', m => m.text || '-', 'text'], ['Tools', m => (m.tools || []).join(', ') || '-'],
      ], d.history, 'No messages yet: a turn adds its messages when it commits.')));
    }, e => queue.set(failure(e)));
    stops.push(stop);
  }
  const list = section(root, key ? 'All conversations' : 'By last activity');
  stops.push(follow(list, '/api/v1/conversations', d => h('div', { id: 'conv-list' }, table([
    ['Conversation', c => { const a = h('a', { href: link(c.key) }, c.key); return c.key === key ? h('b', {}, a) : a; }],
    ['Last activity', c => when(c.last_active)], ['Tokens', tokens],
    ['Queued', c => c.queued], ['Running', running],
  ], d.conversations.map(c => Object.assign({ id: c.key }, c)), 'No conversation yet.'))));
  return together(...stops);
};
