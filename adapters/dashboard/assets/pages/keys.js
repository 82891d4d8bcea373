// Keys: the model pool's keys, masked, with their state, live.
pages.keys = function keys(root) {
  root.append(h('h1', {}, 'Keys'),
    h('p', { class: 'muted' }, 'The API keys of the model and its fallbacks, masked, as every gateway on the store sees them. herald model keys --revive ID clears a mark.'));
  const list = section(root, 'Model keys');
  return follow(list, '/api/v1/model/keys', d => table([
    ['Model', k => k.model], ['ID', k => k.id], ['Key', k => k.key], ['Label', k => k.label || '-'],
    ['Priority', k => k.priority], ['Status', k => k.status, 'status'], ['Cooling until', k => when(k.cooling_until)],
    ['Reason', k => k.reason || '-'], ['Uses', k => k.uses],
  ], d.keys, 'The model has no keys.'));
};
