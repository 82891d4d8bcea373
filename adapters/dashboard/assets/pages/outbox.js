// Outbox: what waits to be sent and the dead letters, live; retry.
pages.outbox = function outbox(root) {
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
    } catch (e) {
      msg.textContent = 'Retry failed: ' + e.message;
      button.disabled = false;
    }
  };
  return together(
    follow(pending, '/api/v1/outbox/pending', d => table([
      ['ID', m => m.id], ['Target', m => m.target], ['Attempts', m => m.attempts],
      ['Next attempt', m => when(m.next_attempt)], ['Text', text, 'text'], ['Last error', m => m.last_error || '-', 'text'],
    ], d.messages, 'Nothing waits to be sent.')),
    follow(dead, '/api/v1/outbox/dead', d => table([
      ['ID', m => m.id], ['Target', m => m.target], ['Attempts', m => m.attempts],
      ['Text', text, 'text'], ['Reason', m => m.last_error || '-', 'text'],
      ['', m => { const b = h('button', { type: 'button', class: 'retry' }, 'Retry'); b.addEventListener('click', () => retry(m.id, b)); return b; }],
    ], d.messages, 'No dead letters.')));
};
