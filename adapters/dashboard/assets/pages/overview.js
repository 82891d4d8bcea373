// Overview: the gateway instances, what they did over the last minute,
// and how much waits where, all from one live route.
pages[''] = function overview(root) {
  root.append(h('h1', {}, 'Overview'));
  const rates = h('div', { class: 'cards', id: 'rates' });
  const queues = h('div', { class: 'cards', id: 'queues' });
  root.append(rates);
  const list = section(root, 'Instances');
  root.append(h('h2', {}, 'Queues'), queues);
  const tile = (parent, key, label, href) => {
    const value = h('b', {}, '…');
    const attrs = { class: 'stat', 'data-stat': key };
    parent.append(href ? h('a', { ...attrs, href }, value, label) : h('div', attrs, value, label));
    return value;
  };
  const rate = {
    turns: tile(rates, 'turns', 'Turns / min'),
    errors: tile(rates, 'errors', 'Errors / min'),
    instances: tile(rates, 'instances', 'Instances'),
  };
  const waiting = [
    ['turns', 'Turns queued', '#/conversations'],
    ['outbox_pending', 'Outbox pending', '#/outbox'],
    ['outbox_dead', 'Dead letters', '#/outbox'],
    ['approvals_pending', 'Approvals pending', '#/approvals'],
    ['delegations_active', 'Delegations active', '#/delegations'],
    ['kanban_running', 'Kanban cards running', '#/kanban'],
  ].map(([key, label, href]) => [key, tile(queues, key, label, href)]);
  const ago = t => {
    const s = Math.max(0, Math.round((Date.now() - new Date(t)) / 1000));
    return s + ' s ago';
  };
  const show = d => {
    const m = d.minute;
    rate.turns.textContent = m.turns;
    rate.errors.textContent = m.errors;
    rate.errors.title = m.turn_errors + ' turns, ' + m.model_errors + ' model calls, ' + m.send_failed + ' sends';
    rate.instances.textContent = d.instances.length;
    for (const [key, value] of waiting) {
      const q = d.queues[key];
      value.textContent = q ? q.count + (q.more ? '+' : '') : '–';
    }
    list.set(table([
      ['Instance', i => i.id], ['Host', i => i.host], ['PID', i => i.pid], ['Version', i => i.version],
      ['Started', i => when(i.started_at)], ['Last seen', i => ago(i.last_seen)],
      ['Turns / min', i => i.minute.turns, 'turns'], ['Turn errors', i => i.minute.turn_errors],
      ['Model errors', i => i.minute.model_errors], ['Sent', i => i.minute.sent], ['Send failures', i => i.minute.send_failed],
    ], d.instances, 'No gateway has recorded itself.'));
  };
  const fail = e => {
    for (const v of [...Object.values(rate), ...waiting.map(w => w[1])]) v.textContent = '–';
    list.set(failure(e));
  };
  return watch('/api/v1/overview', show, fail);
};
