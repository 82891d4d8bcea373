// Cron: the jobs, live; a job's runs, live, and a run's output; run now,
// pause, resume.
pages.cron = function cron(root) {
  root.append(h('h1', {}, 'Cron'));
  const msg = h('p', { role: 'status', id: 'cron-msg' });
  root.append(msg);
  const list = section(root, 'Jobs');
  const detail = h('div', { id: 'cron-runs' });
  root.append(detail);
  const jobPath = id => '/api/v1/cron/jobs/' + encodeURIComponent(id);
  let shown = null; // the job whose runs are shown
  let stopRuns = () => {};
  const act = async (j, action, done) => {
    try {
      await call('POST', jobPath(j.id) + '/' + action);
      msg.textContent = done + ': ' + j.name + ' (' + j.id + ')';
    } catch (e) {
      if (!(e instanceof NotSignedIn)) msg.textContent = 'Not done: ' + e.message;
    }
  };
  const output = async (j, r, into) => {
    try {
      into.replaceChildren(h('pre', { class: 'output' }, (await call('GET', jobPath(j.id) + '/runs/' + encodeURIComponent(r.id) + '/output')).output));
    } catch (e) {
      if (!(e instanceof NotSignedIn)) into.replaceChildren(failure(e));
    }
  };
  // showRuns follows a job's runs; the output shown stays until another
  // is asked for.
  const showRuns = j => {
    stopRuns();
    shown = j;
    const title = h('h2', {}, 'Runs of ' + j.name);
    const runs = h('div', {});
    const out = h('div', { id: 'cron-output' });
    detail.replaceChildren(title, runs, out);
    stopRuns = watch(jobPath(j.id), d => runs.replaceChildren(table([
      ['Run', r => r.id], ['Started', r => when(r.started_at)], ['Ended', r => when(r.ended_at)],
      ['Status', r => r.status + (r.manual ? ' (run now)' : '')], ['Delivery', r => r.delivery || '-'],
      ['Error', r => r.error || r.delivery_error || '-', 'text'],
      ['', r => r.output ? h('button', { type: 'button', class: 'output', onclick: () => output(j, r, out) }, 'Output') : '-'],
    ], d.runs || [], 'No runs yet.')), e => runs.replaceChildren(failure(e)));
  };
  const stopJobs = follow(list, '/api/v1/cron/jobs', d => {
    if (shown && !d.jobs.some(j => j.id === shown.id)) {
      stopRuns();
      shown = null;
      detail.replaceChildren();
    }
    return table([
      ['ID', j => j.id], ['Name', j => j.name], ['State', j => j.state], ['Enabled', j => j.enabled ? 'yes' : 'no'],
      ['Schedule', j => j.schedule_text || '-'], ['Next run', j => when(j.next_run_at)], ['Last run', j => when(j.last_run_at)],
      ['Last status', j => [j.last_status, j.last_error || j.last_delivery_error].filter(Boolean).join(': ') || '-', 'text'], ['Prompt', j => j.prompt || j.script || '-', 'text'],
      ['', j => h('span', {},
        h('button', { type: 'button', 'data-action': 'run', onclick: () => act(j, 'run', 'Run requested') }, 'Run now'),
        j.enabled
          ? h('button', { type: 'button', 'data-action': 'pause', onclick: () => act(j, 'pause', 'Paused') }, 'Pause')
          : h('button', { type: 'button', 'data-action': 'resume', onclick: () => act(j, 'resume', 'Resumed') }, 'Resume'),
        h('button', { type: 'button', 'data-action': 'runs', onclick: () => showRuns(j) }, 'Runs'))],
    ], d.jobs, 'No scheduled jobs.');
  });
  return () => { stopJobs(); stopRuns(); };
};
