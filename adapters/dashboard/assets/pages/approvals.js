// Approvals: the questions waiting for a person, live; the four answers.
const DECISIONS = [['once', 'Allow once'], ['session', 'Allow this session'], ['always', 'Always allow'], ['deny', 'Deny']];

pages.approvals = function approvals(root) {
  root.append(h('h1', {}, 'Approvals'));
  const msg = h('p', { role: 'status' });
  root.append(msg);
  const list = section(root, 'Pending');
  const decide = async (a, d, label) => {
    try {
      await call('POST', '/api/v1/approvals/' + encodeURIComponent(a.id), { decision: d });
      msg.textContent = label + ': ' + a.tool + ' (' + a.id + ')';
    } catch (e) {
      if (!(e instanceof NotSignedIn)) msg.textContent = 'Not answered: ' + e.message;
    }
  };
  return follow(list, '/api/v1/approvals', d => table([
    ['Conversation', a => a.conv], ['Tool', a => a.tool], ['Action', a => a.action, 'text'],
    ['Reason', a => a.reason, 'text'],
    ['Decision', a => h('span', {}, DECISIONS.map(([dec, label]) =>
      h('button', { type: 'button', 'data-decision': dec, onclick: () => decide(a, dec, label) }, label)))],
  ], d.approvals, 'No approval is waiting.'));
};
