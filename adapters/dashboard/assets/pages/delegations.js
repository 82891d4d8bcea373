// Delegations: one delegation, by its id.
pages.delegations = function delegations(root) {
  return lookup(root, 'Delegations', 'delegation id', async id => {
    const d = await call('GET', '/api/v1/delegations/' + encodeURIComponent(id));
    return table([['Field', r => r.id], ['Value', r => r.v, 'text']],
      Object.entries(d).map(([k, v]) => ({ id: k, v: typeof v === 'object' ? JSON.stringify(v) : v })), '');
  });
};
