// Keys: the model pool's keys, masked, with their state, live; revive
// a cooling or dead one.
pages.keys = function keys(root) {
  root.append(h('h1', {}, 'Keys'),
    h('p', { class: 'muted' }, 'The API keys of the model and its fallbacks, masked, as every gateway on the store sees them. Revive clears a cooling or dead mark for every gateway, as herald model keys --revive ID does.'));
  const msg = h('p', { role: 'status' });
  root.append(msg);
  const list = section(root, 'Model keys');
  const revive = async (id, button) => {
    button.disabled = true;
    try {
      await call('POST', '/api/v1/model/keys/' + encodeURIComponent(id) + '/revive');
      msg.textContent = id + ' is revived';
    } catch (e) {
      msg.textContent = 'Revive failed: ' + e.message;
      button.disabled = false;
    }
  };
  const action = k => {
    if (k.status === 'ok') return '';
    const b = h('button', { type: 'button', class: 'revive' }, 'Revive');
    b.addEventListener('click', () => revive(k.id, b));
    return b;
  };
  return follow(list, '/api/v1/model/keys', d => table([
    ['Model', k => k.model], ['ID', k => k.id], ['Key', k => k.key], ['Label', k => k.label || '-'],
    ['Priority', k => k.priority], ['Status', k => k.status, 'status'], ['Cooling until', k => when(k.cooling_until)],
    ['Reason', k => k.reason || '-'], ['Uses', k => k.uses], ['', action],
  ], d.keys, 'The model has no keys.'));
};
