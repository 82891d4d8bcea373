// herald's dashboard: one page per hash route, reading /api/v1 with the
// session cookie. Text from the server is only ever set as text.
'use strict';


let stopPage = () => {}; // ends the current page's timers and streams

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function csrfToken() {
  const m = document.cookie.match(/(?:^|;\s*)herald_csrf=([^;]*)/);
  return m ? decodeURIComponent(m[1]) : '';
}

class NotSignedIn extends Error {}

async function call(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (method !== 'GET') opts.headers['X-Herald-CSRF'] = csrfToken();
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const data = await r.json().catch(() => ({}));
  if (r.status === 401) {
    showLogin();
    throw new NotSignedIn('sign in first');
  }
  if (!r.ok) {
    const msg = data.error && (data.error.message || data.error);
    throw new Error(r.status === 404 && !msg ? 'not served by this gateway' : (msg || r.statusText));
  }
  return data;
}

function when(t) {
  if (!t || t.startsWith('0001-')) return '-';
  return new Date(t).toLocaleString();
}

function table(columns, rows, empty) {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', {},
    h('thead', {}, h('tr', {}, columns.map(c => h('th', {}, c[0])))),
    h('tbody', {}, rows.map(r => h('tr', { 'data-id': r.id || '' },
      columns.map(c => { const v = c[1](r); return h('td', { class: c[2] || '' }, v); })))));
}

function failure(err) {
  return h('p', { class: 'error', role: 'alert' }, String(err.message || err));
}

// watch shows what a GET of path answers, at once and each time it
// changes: asked for text/event-stream, the API streams the route's
// answer whenever it differs (the server reads it every half second, so
// the page itself never polls). show gets each answer, fail each reason
// a read failed. A stream the server refused (signed out, a bad path)
// is asked once with a plain GET, which says why, and tried again in 5 s.
function watch(path, show, fail) {
  let es = null;
  let retry = null;
  let stopped = false;
  const open = () => {
    es = new EventSource(path, { withCredentials: true });
    es.onmessage = e => show(JSON.parse(e.data));
    es.addEventListener('failed', e => {
      const d = JSON.parse(e.data || '{}');
      fail(new Error((d.error && d.error.message) || 'the read failed'));
    });
    es.onerror = () => {
      if (stopped || es.readyState !== EventSource.CLOSED) return; // it reconnects by itself
      call('GET', path).then(show, err => { if (!(err instanceof NotSignedIn)) fail(err); });
      if (!stopped) retry = setTimeout(open, 5000);
    };
  };
  open();
  return () => { stopped = true; es.close(); clearTimeout(retry); };
}

// follow keeps a section showing render of path's answer, live (watch).
function follow(sec, path, render) {
  return watch(path, d => sec.set(render(d)), e => sec.set(failure(e)));
}

// together returns one stop for several.
function together(...stops) {
  return () => stops.forEach(s => s());
}

// section returns a titled part of the page whose body fill replaces.
function section(root, title) {
  const body = h('div', {});
  root.append(h('h2', {}, title), body);
  return {
    set(...nodes) { body.replaceChildren(...nodes); },
    async fill(f) {
      try { body.replaceChildren(await f()); } catch (e) {
        if (!(e instanceof NotSignedIn)) body.replaceChildren(failure(e));
      }
    },
  };
}

// lookup is a page that shows one thing the API finds by id.
function lookup(root, title, label, show) {
  root.append(h('h1', {}, title));
  const input = h('input', { placeholder: label, required: true });
  const out = h('div', {});
  const form = h('form', { class: 'inline' }, input, h('button', { type: 'submit' }, 'Show'));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    try { out.replaceChildren(await show(input.value.trim())); } catch (err) {
      if (!(err instanceof NotSignedIn)) out.replaceChildren(failure(err));
    }
  });
  root.append(form, out);
  return () => {};
}

// pages are the routes: pages/*.js each add theirs under its hash ('' is
// the overview). A page fills root and returns what stops it.
const pages = {};

function route() {
  stopPage();
  const name = location.hash.replace(/^#\/?/, '').split('?')[0];
  const page = pages[name] || pages[''];
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.getAttribute('href') === '#/' + (pages[name] ? name : ''));
  }
  const root = document.getElementById('page');
  root.replaceChildren();
  root.dataset.page = name || 'overview';
  stopPage = page(root) || (() => {});
}

function showLogin() {
  stopPage();
  stopPage = () => {};
  document.getElementById('page').replaceChildren();
  document.getElementById('nav').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('login').hidden = false;
  document.getElementById('key').focus();
}

function showApp(loginRequired) {
  document.getElementById('login').hidden = true;
  document.getElementById('nav').hidden = false;
  document.getElementById('logout').hidden = !loginRequired;
  route();
}

async function start() {
  const login = document.getElementById('login');
  login.addEventListener('submit', async e => {
    e.preventDefault();
    const key = document.getElementById('key');
    const error = document.getElementById('login-error');
    const r = await fetch('/ui/login', {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ key: key.value }),
    });
    key.value = '';
    if (!r.ok) {
      error.textContent = (await r.json().catch(() => ({}))).error || 'Sign-in failed.';
      return;
    }
    error.textContent = '';
    showApp(true);
  });
  document.getElementById('logout').addEventListener('click', async () => {
    await fetch('/ui/logout', { method: 'POST', credentials: 'same-origin' });
    showLogin();
  });
  window.addEventListener('hashchange', () => { if (document.getElementById('login').hidden) route(); });
  const st = await (await fetch('/ui/session', { credentials: 'same-origin' })).json();
  if (st.signed_in) showApp(st.login_required); else showLogin();
}

// The pages' scripts follow this one in the bundle; the page starts once
// they are all read.
document.addEventListener('DOMContentLoaded', start);
