// Conversations: an API conversation's timeline, by its id.
pages.conversations = function conversations(root) {
  return lookup(root, 'Conversations', 'API conversation id', async id => table([
    ['At', i => when(i.at)], ['Kind', i => i.kind || '-'], ['Text', i => i.text, 'text'],
  ], (await call('GET', '/api/v1/conversations/' + encodeURIComponent(id) + '/timeline')).items, 'Nothing was sent to this conversation.'));
};
