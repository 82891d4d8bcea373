// Overview: how much waits where, each count live.
pages[''] = function overview(root) {
  root.append(h('h1', {}, 'Overview'));
  const stats = h('div', { class: 'cards', id: 'stats' });
  root.append(stats);
  const tiles = [
    ['Outbox pending', '#/outbox', '/api/v1/outbox/pending', d => d.messages.length],
    ['Dead letters', '#/outbox', '/api/v1/outbox/dead', d => d.messages.length],
    ['Approvals pending', '#/approvals', '/api/v1/approvals', d => d.approvals.length],
    ['Cron jobs', '#/cron', '/api/v1/cron/jobs', d => d.jobs.length],
    ['Kanban boards', '#/kanban', '/api/v1/kanban/boards', d => d.boards.length],
  ];
  return together(...tiles.map(([label, href, path, count]) => {
    const value = h('b', {}, '…');
    stats.append(h('a', { class: 'stat', href }, value, label));
    return watch(path, d => { value.textContent = count(d); }, () => { value.textContent = '–'; });
  }));
};
