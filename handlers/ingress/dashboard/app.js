// agentbus dashboard: fleet health, recent runs and a run viewer (timeline
// and provenance DAG), drawn as inline SVG from the tenant-scoped HTTP API.
// Plain JavaScript, no libraries, nothing fetched but the ingress's own API.
//
// The page's state lives in the URL: ?tenant=demo and/or
// #tenant=demo&window=24h&plan=<plan_id> (the hash wins over the query).
(function () {
  'use strict';

  var SVGNS = 'http://www.w3.org/2000/svg';
  var REFRESH_MS = 5000; // fleet health, runs, alerts
  var LIVE_MS = 2000; // the run viewer while its run is not finished
  var RETRY_MS = 5000; // the run viewer after a failed read
  var KEY_STORAGE = 'agentbus.apiKey';
  var WINDOWS = ['1h', '24h', '168h'];
  var TERMINAL_STATUSES = { complete: 1, failed: 1, rejected: 1, expired: 1 };
  var WARN_CODES = {
    PARTIAL_SUCCESS: 1, MISSING_INFO: 1, AMBIGUOUS_INTENT: 1, CONFIRM_REQUIRED: 1,
    REVIEW_REQUIRED: 1, LOW_CONFIDENCE: 1, SOURCE_CONFLICT: 1
  };
  var STEP_EVENT = /^step_(\d+)\.(started|complete|failed)$/;
  var REPLAN_EVENT = /^(replan\.triggered|plan\.revised|supervisor\.reiterated)$/;
  var GATE_EVENT = /^(gate\.|approval\.required|approval\.decided|run\.interrupted|run\.resumed|run\.parked|elicitation\.)/;

  var state = { tenant: 'demo', window: '24h', plan: '', auto: true };
  var gen = 0; // bumps when the tenant changes: older answers are dropped
  var refreshTimer = null;
  var cache = { health: null, runs: [], alerts: [] };
  var viewer = { token: 0, timer: null, id: '', plan: null, events: null, dag: null, live: false,
    extraPolls: 0, selected: '', failed: {} };
  var errors = {}; // source → {label, err}, shown in the banner
  var tenantHooks = []; // called with the new tenant when it changes

  function $(id) { return document.getElementById(id); }

  // ---- DOM helpers ---------------------------------------------------------

  function el(tag, attrs) {
    var n = document.createElement(tag);
    setAttrs(n, attrs);
    for (var i = 2; i < arguments.length; i++) append(n, arguments[i]);
    return n;
  }
  function svg(tag, attrs) {
    var n = document.createElementNS(SVGNS, tag);
    setAttrs(n, attrs);
    for (var i = 2; i < arguments.length; i++) append(n, arguments[i]);
    return n;
  }
  function setAttrs(n, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === 'text') n.textContent = String(v);
      else n.setAttribute(k, String(v));
    });
  }
  function append(n, c) {
    if (c === undefined || c === null || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { append(n, x); }); return; }
    n.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
  function clear(n) { while (n.firstChild) n.removeChild(n.firstChild); }
  function tip(text) { return svg('title', { text: text }); }
  function truncate(s, n) { s = String(s == null ? '' : s); return s.length > n ? s.slice(0, Math.max(1, n - 1)) + '…' : s; }
  function round(v) { return Math.round(v * 10) / 10; }

  // ---- formatting ------------------------------------------------------------

  // parseTS reads an RFC 3339 time with any sub-second precision into
  // milliseconds (a float: the runs of the offline model take milliseconds).
  function parseTS(s) {
    if (!s) return NaN;
    var m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(s);
    if (!m) return Date.parse(s);
    var base = Date.parse(m[1] + m[3]);
    return m[2] ? base + parseFloat('0.' + m[2]) * 1000 : base;
  }
  function pad2(n) { return n < 10 ? '0' + n : String(n); }
  function fmtDateTime(ms) {
    if (!isFinite(ms)) return '—';
    var d = new Date(ms), now = new Date();
    var time = pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
    if (d.toDateString() === now.toDateString()) return time;
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + time;
  }
  function fmtInt(n) { return Math.round(Number(n) || 0).toLocaleString('en-US'); }
  function fmtPct(r) { r = Number(r) || 0; var p = r * 100; return (p === 0 || p === 100 ? p.toFixed(0) : p.toFixed(1)) + ' %'; }
  function fmtUSD(v) { v = Number(v) || 0; return '$' + (v !== 0 && Math.abs(v) < 0.01 ? v.toFixed(4) : v.toFixed(2)); }
  function fmtDur(ms) {
    ms = Number(ms) || 0;
    if (ms < 1) return ms === 0 ? '0 ms' : ms.toFixed(2) + ' ms';
    if (ms < 10) return ms.toFixed(1) + ' ms';
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
    var s = Math.round(ms / 1000);
    return Math.floor(s / 60) + ' min ' + pad2(s % 60) + ' s';
  }
  function fmtNum(v) { v = Number(v) || 0; return v % 1 === 0 ? String(v) : v.toFixed(2); }

  function codeClass(code) {
    if (!code) return 'neutral';
    if (code === 'SUCCESS') return 'ok';
    if (WARN_CODES[code]) return 'warn';
    if (code === 'USER_CANCEL') return 'neutral';
    return 'bad';
  }
  function statusClass(status) {
    switch (status) {
      case 'complete': return 'ok';
      case 'failed': case 'rejected': case 'expired': return 'bad';
      case 'awaiting_gate': case 'paused': return 'warn';
      case 'revised': case 'pending': case '': case undefined: return 'neutral';
      default: return 'running';
    }
  }
  function badge(text, cls) { return el('span', { class: 'badge ' + cls, text: text || '—' }); }

  // ---- URL state -------------------------------------------------------------

  function readURL() {
    var q = new URLSearchParams(location.search);
    var h = new URLSearchParams(location.hash.replace(/^#/, ''));
    function pick(k) { return h.get(k) || q.get(k) || ''; }
    var w = pick('window');
    return { tenant: pick('tenant') || 'demo', window: WINDOWS.indexOf(w) >= 0 ? w : '24h', plan: pick('plan') };
  }
  function writeURL(push) {
    var h = new URLSearchParams();
    h.set('tenant', state.tenant);
    h.set('window', state.window);
    if (state.plan) h.set('plan', state.plan);
    var url = location.pathname + location.search + '#' + h.toString();
    if (url === location.pathname + location.search + location.hash) return;
    if (push) history.pushState(null, '', url); else history.replaceState(null, '', url);
  }

  // ---- the API ---------------------------------------------------------------

  function ApiError(status, code, message) {
    this.status = status; this.code = code; this.message = message;
  }
  ApiError.prototype = Object.create(Error.prototype);

  function apiKey() { try { return sessionStorage.getItem(KEY_STORAGE) || ''; } catch (e) { return ''; } }
  function setApiKey(k) {
    try { if (k) sessionStorage.setItem(KEY_STORAGE, k); else sessionStorage.removeItem(KEY_STORAGE); } catch (e) { /* storage off */ }
  }

  // authHeaders are the headers of every API call: the tenant and, when
  // set, the API key as a bearer credential; extra adds to them.
  function authHeaders(extra) {
    var headers = { Accept: 'application/json' };
    if (state.tenant) headers['X-Tenant-Id'] = state.tenant;
    var key = apiKey();
    if (key) headers.Authorization = 'Bearer ' + key;
    Object.keys(extra || {}).forEach(function (k) { headers[k] = extra[k]; });
    return headers;
  }

  // failed turns an error answer ({error: {code, message}}) into an
  // ApiError; text is its body.
  function failed(resp, text) {
    var body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
    var e = body && body.error;
    return new ApiError(resp.status, (e && e.code) || 'http_' + resp.status,
      (e && e.message) || truncate(text, 200) || resp.statusText);
  }
  function unreachable(err) {
    return new ApiError(0, 'network', 'the ingress could not be reached: ' + (err && err.message || err));
  }

  // api calls path (GET, or opts.method with opts.body as JSON and
  // opts.headers) and returns its JSON; an error answer, a non-JSON answer
  // or an unreachable ingress throws ApiError.
  function api(path, opts) {
    opts = opts || {};
    var init = { method: opts.method || 'GET', headers: authHeaders(opts.headers), cache: 'no-store', credentials: 'omit' };
    if (opts.body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    return fetch(path, init).then(function (resp) {
      return resp.text().then(function (text) {
        if (!resp.ok) throw failed(resp, text);
        var body = null;
        try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
        if (body === null || typeof body !== 'object') throw new ApiError(resp.status, 'invalid_response', 'the answer is not JSON');
        return body;
      });
    }, function (err) { throw unreachable(err); });
  }

  // ---- the error banner -----------------------------------------------------

  function reportError(source, label, err) {
    if (!(err instanceof ApiError)) {
      err = new ApiError(0, 'client_error', (err && err.message) || String(err));
      if (window.console) console.error(label, err);
    }
    errors[source] = { label: label, err: err };
    renderErrors();
  }
  function clearError(source) { if (errors[source]) { delete errors[source]; renderErrors(); } }
  function clearErrors(prefix) {
    Object.keys(errors).forEach(function (k) { if (k.indexOf(prefix) === 0) delete errors[k]; });
    renderErrors();
  }
  function renderErrors() {
    var box = $('errors'), keys = Object.keys(errors);
    clear(box);
    if (!keys.length) { box.hidden = true; return; }
    box.hidden = false;
    var list = el('ul');
    keys.forEach(function (k) {
      var e = errors[k].err;
      list.appendChild(el('li', null, el('strong', { text: errors[k].label + ': ' }), el('code', { text: e.code }),
        ' — ' + e.message + (e.status ? ' (HTTP ' + e.status + ')' : '')));
    });
    append(box, [el('div', { text: keys.length === 1 ? 'A request failed:' : keys.length + ' requests failed:' }), list]);
  }
  function guard(source, label, fn, onFail) {
    return Promise.resolve().then(fn).then(function () { clearError(source); }, function (err) {
      reportError(source, label, err);
      if (onFail) onFail();
    });
  }
  var UNREAD = ' could not be read (see the error above).';

  // ---- fleet health -----------------------------------------------------------

  function loadHealth() {
    var g = gen;
    return api('/agent/health?window=' + encodeURIComponent(state.window)).then(function (h) {
      if (g !== gen) return;
      cache.health = h;
      renderHealth();
    });
  }

  function renderHealth() {
    var h = cache.health;
    if (!h) return;
    var tiles = $('tiles');
    clear(tiles);
    function tile(metric, label, value, sub, cls, title) {
      tiles.appendChild(el('div', { class: 'tile' + (cls ? ' ' + cls : ''), 'data-metric': metric, title: title },
        el('div', { class: 'label', text: label }), el('div', { class: 'value', text: value }),
        sub ? el('div', { class: 'sub', text: sub }) : null));
    }
    var runs = h.runs || 0;
    tile('runs', 'Runs', fmtInt(runs), 'finished, last ' + windowLabel(state.window));
    // success_rate: SUCCESS without a replan; completed_rate: SUCCESS at all.
    var completed = h.completed_rate !== undefined ? h.completed_rate : ((h.terminal_codes || {}).SUCCESS || 0) / (runs || 1);
    tile('success_rate', 'Success rate', runs ? fmtPct(h.success_rate) : '—',
      runs ? 'first try; ' + fmtPct(completed) + ' completed' : 'no runs',
      runs ? (h.success_rate >= 0.8 ? 'good' : 'bad') : '',
      'Runs that ended SUCCESS without a replan; completed: runs that ended SUCCESS at all');
    tile('subagent_p95_ms', 'p95 step duration', h.steps ? fmtDur(h.subagent_p95_ms) : '—', plural(h.steps, 'step'));
    tile('cost_usd', 'Cost', fmtUSD(h.cost_usd), runs ? fmtUSD((h.cost_usd || 0) / runs) + ' per run' : '');
    tile('tokens', 'Tokens', fmtInt((h.input_tokens || 0) + (h.output_tokens || 0)),
      fmtInt(h.input_tokens) + ' in / ' + fmtInt(h.output_tokens) + ' out');
    tile('skill_calls', 'Skill calls', fmtInt(h.skill_calls), fmtPct(h.large_response_rate) + ' large responses');
    tile('replan_exhaustion_rate', 'Replan exhaustion', fmtPct(h.replan_exhaustion_rate), 'of runs',
      h.replan_exhaustion_rate > 0.05 ? 'bad' : '');
    tile('contract_violations', 'Contract violations', fmtInt(h.contract_violations),
      fmtPct(h.contract_violation_rate) + ' of steps', h.contract_violations > 0 ? 'bad' : '');

    var codes = Object.keys(h.terminal_codes || {}).map(function (c) {
      return { label: c, value: h.terminal_codes[c], cls: codeClass(c), text: fmtInt(h.terminal_codes[c]) };
    }).sort(function (a, b) { return b.value - a.value || a.label.localeCompare(b.label); });
    barChart($('chart-codes'), codes, { title: 'Runs by terminal code', empty: 'No runs finished in this window.' });

    var skills = Object.keys(h.skill_failure_rate || {}).map(function (s) {
      var r = h.skill_failure_rate[s];
      return { label: s, value: r, cls: r > 0 ? 'bad' : 'ok', text: fmtPct(r) };
    }).sort(function (a, b) { return b.value - a.value || a.label.localeCompare(b.label); });
    barChart($('chart-skills'), skills, { max: 1, title: 'Skill failure rate by skill', empty: 'No skill calls in this window.' });

    var replans = Object.keys(h.avg_replans_by_task_type || {}).map(function (t) {
      var v = h.avg_replans_by_task_type[t];
      return { label: t, value: v, cls: '', text: fmtNum(v) };
    }).sort(function (a, b) { return b.value - a.value || a.label.localeCompare(b.label); });
    barChart($('chart-replans'), replans, { minMax: 1, title: 'Average replans by task type', empty: 'No runs in this window.' });
  }

  function healthFailed() {
    if (cache.health) return; // keep the last figures; the banner says they are stale
    clear($('tiles'));
    $('tiles').appendChild(el('div', { class: 'empty muted', text: 'Fleet health' + UNREAD }));
    ['chart-codes', 'chart-skills', 'chart-replans'].forEach(function (id) {
      clear($(id));
      $(id).appendChild(el('div', { class: 'empty', text: 'No data.' }));
    });
  }

  function windowLabel(w) { return w === '168h' ? '7 days' : w === '1h' ? 'hour' : '24 hours'; }
  function plural(n, word) { return fmtInt(n) + ' ' + word + (n === 1 ? '' : 's'); }

  // barChart draws items ({label, value, cls, text}) as horizontal bars:
  // each bar is a rect.chart-bar with data-label and data-value.
  function barChart(container, items, opts) {
    clear(container);
    if (!items.length) { container.appendChild(el('div', { class: 'empty', text: opts.empty })); return; }
    var width = Math.max(260, container.clientWidth || 360);
    var labelW = Math.round(Math.min(170, width * 0.4)), valueW = 58, rowH = 24, barH = 15;
    var plotW = width - labelW - valueW;
    var max = opts.max || Math.max(opts.minMax || 0, Math.max.apply(null, items.map(function (i) { return i.value; }))) || 1;
    var height = items.length * rowH + 2;
    var summary = opts.title + ': ' + items.map(function (i) { return i.label + ' ' + i.text; }).join(', ');
    var root = svg('svg', { viewBox: '0 0 ' + width + ' ' + height, width: width, height: height, role: 'img',
      'aria-label': summary, preserveAspectRatio: 'xMinYMin meet' });
    items.forEach(function (it, i) {
      var y = i * rowH + 1, w = it.value > 0 ? Math.max(2, it.value / max * plotW) : 0;
      root.appendChild(svg('g', { class: 'row' },
        tip(it.label + ': ' + it.text),
        svg('text', { x: labelW - 8, y: y + rowH / 2 + 4, 'text-anchor': 'end', text: truncate(it.label, Math.floor(labelW / 7)) }),
        svg('rect', { class: 'track', x: labelW, y: y + (rowH - barH) / 2, width: plotW, height: barH, rx: 3 }),
        svg('rect', { class: 'chart-bar' + (it.cls ? ' ' + it.cls : ''), x: labelW, y: y + (rowH - barH) / 2,
          width: round(w), height: barH, rx: 3, 'data-label': it.label, 'data-value': it.value }),
        svg('text', { class: 'value-label', x: labelW + plotW + 6, y: y + rowH / 2 + 4, text: it.text })));
    });
    container.appendChild(root);
  }

  // ---- alerts ----------------------------------------------------------------

  function loadAlerts() {
    var g = gen;
    return api('/agent/audit/events?type=alert.fired&type=alert.resolved&limit=20').then(function (r) {
      if (g !== gen) return;
      cache.alerts = r.events || [];
      var list = $('alerts');
      clear(list);
      if (!cache.alerts.length) { list.appendChild(el('li', { class: 'muted', text: 'No alerts fired or resolved.' })); return; }
      cache.alerts.forEach(function (ev) {
        var p = ev.payload || {};
        var fired = ev.event_type === 'alert.fired';
        list.appendChild(el('li', { title: p.description || '' },
          el('span', { class: 'alert-state ' + (fired ? 'fired' : 'resolved'), text: fired ? 'FIRED' : 'resolved' }), ' ',
          el('strong', { text: p.rule || ev.event_type }),
          p.value !== undefined ? ' — ' + fmtNum(p.value) + (p.threshold !== undefined ? ' vs ' + fmtNum(p.threshold) : '') : '',
          el('span', { class: 'muted', text: ' · ' + fmtDateTime(parseTS(ev.ts)) })));
      });
    });
  }

  // ---- recent runs -----------------------------------------------------------

  function loadRuns() {
    var g = gen;
    return api('/agent/runs?limit=50').then(function (r) {
      if (g !== gen) return;
      cache.runs = r.runs || [];
      renderRuns();
      if (!state.plan && cache.runs.length) selectPlan(cache.runs[0].plan_id, false);
    });
  }

  function renderRuns() {
    var body = $('runs').tBodies[0];
    clear(body);
    $('runs-count').textContent = cache.runs.length ? cache.runs.length + (cache.runs.length === 1 ? ' run' : ' runs') : '';
    if (!cache.runs.length) {
      body.appendChild(el('tr', null, el('td', { colspan: 7, class: 'muted', text: 'No finished runs for tenant ' + state.tenant + '.' })));
      return;
    }
    cache.runs.forEach(function (run) {
      var at = parseTS(run.finished_at);
      var tr = el('tr', { 'data-plan-id': run.plan_id, class: run.plan_id === state.plan ? 'selected' : null,
        'aria-selected': run.plan_id === state.plan ? 'true' : 'false' },
        el('td', { class: 'mono' }, el('a', { href: planHref(run.plan_id), class: 'plan-link', text: run.plan_id })),
        el('td', null, badge(run.terminal_code, codeClass(run.terminal_code))),
        el('td', { text: run.task_type || '—' }),
        el('td', { class: 'num', text: fmtInt(run.replans) }),
        el('td', { class: 'num', text: fmtInt(run.input_tokens) + ' / ' + fmtInt(run.output_tokens) }),
        el('td', { class: 'num', text: fmtUSD(run.cost_usd) }),
        el('td', { title: run.finished_at, text: fmtDateTime(at) }));
      body.appendChild(tr);
    });
  }

  function planHref(id) {
    var h = new URLSearchParams();
    h.set('tenant', state.tenant); h.set('window', state.window); h.set('plan', id);
    return '#' + h.toString();
  }

  function markSelectedRow() {
    Array.prototype.forEach.call($('runs').tBodies[0].rows, function (tr) {
      var on = tr.getAttribute('data-plan-id') === state.plan;
      tr.classList.toggle('selected', on);
      tr.setAttribute('aria-selected', on ? 'true' : 'false');
    });
  }

  // ---- the refresh loop ------------------------------------------------------

  function refreshAll() {
    clearTimeout(refreshTimer);
    return Promise.all([
      guard('health', 'Fleet health (GET /agent/health)', loadHealth, healthFailed),
      guard('runs', 'Recent runs (GET /agent/runs)', loadRuns, function () {
        if (cache.runs.length) return;
        var body = $('runs').tBodies[0];
        clear(body);
        body.appendChild(el('tr', null, el('td', { colspan: 7, class: 'muted', text: 'The runs' + UNREAD })));
      }),
      guard('alerts', 'Recent alerts (GET /agent/audit/events)', loadAlerts, function () {
        if (cache.alerts.length) return;
        clear($('alerts'));
        $('alerts').appendChild(el('li', { class: 'muted', text: 'The alerts' + UNREAD }));
      })
    ]).then(function () {
      $('updated').textContent = 'Updated ' + fmtDateTime(Date.now());
      clearTimeout(refreshTimer);
      if (state.auto) refreshTimer = setTimeout(refreshAll, REFRESH_MS);
    });
  }

  // ---- the run viewer --------------------------------------------------------

  function selectPlan(id, push) {
    id = (id || '').trim();
    if (id === state.plan && viewer.id === id) return;
    state.plan = id;
    writeURL(push);
    markSelectedRow();
    loadViewer();
  }

  function loadViewer() {
    clearTimeout(viewer.timer);
    var id = state.plan, token = ++viewer.token;
    if (viewer.id !== id) {
      viewer.id = id; viewer.plan = null; viewer.events = null; viewer.dag = null; viewer.extraPolls = 0; viewer.selected = '';
      viewer.failed = {}; viewer.reads = 0;
      clearErrors('viewer.');
      $('plan-input').value = id;
      renderViewer();
    }
    if (!id) return;
    var enc = encodeURIComponent(id);
    var reads = [
      { key: 'plan', label: 'Plan ' + id + ' (GET /agent/plans/{id})', path: '/agent/plans/' + enc },
      { key: 'trace', label: 'Trace of ' + id + ' (GET /agent/plans/{id}/trace)', path: '/agent/plans/' + enc + '/trace' },
      { key: 'dag', label: 'DAG of ' + id + ' (GET /agent/plans/{id}/trace?view=dag)', path: '/agent/plans/' + enc + '/trace?view=dag' }
    ];
    Promise.all(reads.map(function (r) {
      return api(r.path).then(function (v) { return { ok: true, v: v }; }, function (e) { return { ok: false, e: e }; });
    })).then(function (res) {
      if (token !== viewer.token) return;
      viewer.reads = (viewer.reads || 0) + 1;
      $('viewer').setAttribute('data-reads', viewer.reads); // how often the viewer read its run
      var failed = false, missing = false;
      viewer.failed = {};
      res.forEach(function (r, i) {
        var src = 'viewer.' + reads[i].key;
        if (!r.ok) {
          failed = true;
          if (r.e && r.e.status === 404) missing = true;
          reportError(src, reads[i].label, r.e);
          viewer.failed[reads[i].key] = true;
          return;
        }
        clearError(src);
        if (i === 0) viewer.plan = r.v.plan || null;
        if (i === 1) viewer.events = r.v.events || [];
        if (i === 2) viewer.dag = r.v.dag || { nodes: [], edges: [] };
      });
      var status = viewer.plan ? viewer.plan.status : '';
      var finished = (viewer.events || []).some(function (e) { return e.event_type === 'run.finished'; });
      var terminal = !!TERMINAL_STATUSES[status];
      // A finished plan's last trace events may still be being indexed:
      // poll a few more times until run.finished shows.
      if (terminal && !finished) viewer.extraPolls++;
      viewer.live = !failed && (!terminal || (!finished && viewer.extraPolls <= 10));
      try { renderViewer(); } catch (e) { reportError('viewer.render', 'Run viewer', e); }
      var next = failed ? (missing ? 0 : RETRY_MS) : viewer.live ? LIVE_MS : 0;
      if (next && state.auto) viewer.timer = setTimeout(loadViewer, next);
    });
  }

  function renderViewer() {
    renderSummary();
    renderTimeline();
    renderDAG();
    renderSteps();
    renderDetails();
  }

  function routingOf(events) {
    for (var i = 0; events && i < events.length; i++) if (events[i].event_type === 'routing.decided') return events[i].payload || {};
    return {};
  }
  function finishedEvent(events) {
    for (var i = (events || []).length - 1; i >= 0; i--) if (events[i].event_type === 'run.finished') return events[i];
    return null;
  }

  function renderSummary() {
    var box = $('run-summary');
    clear(box);
    if (!viewer.id) { box.appendChild(el('p', { class: 'muted', text: 'Select a run in the table to see its timeline and DAG.' })); return; }
    var p = viewer.plan, fin = finishedEvent(viewer.events), route = routingOf(viewer.events);
    box.appendChild(el('span', { class: 'plan-id', text: viewer.id }));
    if (!p) { box.appendChild(el('span', { class: 'muted', text: viewer.failed.plan ? 'The plan' + UNREAD : 'loading…' })); return; }
    box.appendChild(badge(p.status, statusClass(p.status)));
    var code = fin ? fin.outcome : '';
    if (code) box.appendChild(badge(code, codeClass(code)));
    if (viewer.live) {
      box.appendChild(el('span', { class: 'live', text: state.auto ? 'live — refreshing every ' + LIVE_MS / 1000 + ' s' :
        'in progress — auto-refresh is off' }));
    }
    var usage = p.usage || {};
    var t0 = parseTS(p.created_at), t1 = parseTS(p.completed_at);
    var fields = [
      ['task type', route.task_type || (fin && fin.task_type) || '—'],
      ['pattern', route.pattern || '—'],
      ['steps', String((p.steps || []).length)],
      ['replans', String(p.replan_count || 0)],
      ['tokens', fmtInt(usage.input_tokens) + ' in / ' + fmtInt(usage.output_tokens) + ' out'],
      ['model calls', fmtInt(usage.model_calls)],
      ['cost', fmtUSD(usage.cost_usd)],
      ['duration', isFinite(t0) && isFinite(t1) ? fmtDur(t1 - t0) : '—'],
      ['session', p.session_id || '—']
    ];
    var dl = el('dl');
    fields.forEach(function (f) { dl.appendChild(el('div', null, el('dt', { text: f[0] }), el('dd', { text: f[1] }))); });
    box.appendChild(dl);
  }

  // tasks folds the trace into one record per task (step or lane).
  function tasksOf(evs, plan) {
    var byTask = {}, order = [], planSteps = {};
    ((plan && plan.steps) || []).forEach(function (s) { if (s.task_id) planSteps[s.task_id] = s; });
    evs.forEach(function (ev) {
      if (!ev.task_id) return;
      var t = byTask[ev.task_id];
      if (!t) {
        t = byTask[ev.task_id] = { id: ev.task_id, first: ev.t, last: ev.t, calls: [], events: [], planStep: planSteps[ev.task_id] };
        order.push(t);
      }
      t.last = ev.t;
      t.events.push(ev);
      var m = STEP_EVENT.exec(ev.event_type);
      if (m) {
        t.step = m[1];
        if (m[2] === 'started') {
          t.start = ev.t;
          var p = ev.payload || {};
          if (p.skills) t.skills = p.skills;
          if (p.group) t.group = p.group;
        } else { t.end = ev.t; t.status = m[2]; }
      } else if (ev.event_type === 'subagent.finish') {
        t.finish = ev.t; t.finishStatus = ev.outcome || (ev.payload || {}).status;
      } else if (ev.event_type === 'skill.called') {
        t.calls.push(ev);
      }
    });
    // Steps of the plan that have not started yet still get a row.
    ((plan && plan.steps) || []).forEach(function (s) {
      if (s.task_id && !byTask[s.task_id]) {
        var t = byTask[s.task_id] = { id: s.task_id, calls: [], events: [], planStep: s, step: String(s.step_index), skills: s.skills };
        order.push(t);
      }
    });
    order.forEach(function (t) {
      if (!t.step && t.planStep) t.step = String(t.planStep.step_index);
      if (!t.skills && t.planStep) t.skills = t.planStep.skills;
    });
    return order;
  }

  // barStatus is a task's state for its bar: its step event's outcome, else
  // the plan's word for the step, else its subagent's outcome.
  function barStatus(t) {
    var ps = t.planStep && t.planStep.status;
    if (t.status) return t.status;
    if (ps === 'revised') return 'revised';
    if (ps === 'awaiting_gate') return 'waiting';
    if (ps === 'complete' || ps === 'failed') return ps;
    if (ps === 'running') return viewer.live ? 'running' : 'unfinished';
    if (t.finish !== undefined) return t.finishStatus === 'complete' ? 'complete' : 'failed';
    return viewer.live ? 'running' : 'unfinished';
  }

  function parked() {
    var st = viewer.plan && viewer.plan.status;
    return st === 'awaiting_gate' || st === 'paused';
  }

  function niceStep(span, target) {
    var raw = span / Math.max(1, target), pow = Math.pow(10, Math.floor(Math.log10(raw)));
    var n = raw / pow;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * pow;
  }
  function fmtOffset(ms, step) {
    if (step < 1000) return '+' + (step < 1 ? ms.toFixed(2) : step < 10 ? ms.toFixed(ms % 1 ? 1 : 0) : Math.round(ms)) + ' ms';
    if (step < 60000) return '+' + (ms / 1000).toFixed(step < 10000 && ms % 1000 ? 1 : 0) + ' s';
    return '+' + Math.floor(ms / 60000) + ':' + pad2(Math.round(ms / 1000) % 60);
  }

  function renderTimeline() {
    var box = $('timeline');
    clear(box);
    if (!viewer.id) return;
    if (!viewer.events) { box.appendChild(el('div', { class: 'empty', text: viewer.failed.trace ? 'The trace' + UNREAD : 'Loading the trace…' })); return; }
    var evs = viewer.events.map(function (e) {
      var c = Object.assign({}, e); c.t = parseTS(e.ts); return c;
    }).filter(function (e) { return isFinite(e.t); }).sort(function (a, b) { return a.t - b.t; });
    if (!evs.length) { box.appendChild(el('div', { class: 'empty', text: 'No trace events yet.' })); return; }
    var t0 = evs[0].t, t1 = evs[evs.length - 1].t;
    var now = Date.now();
    // While live, the axis runs to now (unless the browser's clock is far off the server's).
    // A run parked at a gate waits for a human: its axis ends at its last event.
    if (viewer.live && !parked() && now > t1 && now - t1 < 10 * 60 * 1000) t1 = now;
    var span = Math.max(t1 - t0, 0.001);
    var tasks = tasksOf(evs, viewer.plan);

    var width = Math.max(520, (box.clientWidth || 900) - 14);
    var labelW = 176, rightPad = 86, top = 46, rowH = 26, barH = 14;
    var plotW = width - labelW - rightPad;
    var rows = 1 + tasks.length;
    var height = top + rows * rowH + 6;
    function x(t) { return labelW + (t - t0) / span * plotW; }

    var root = svg('svg', { viewBox: '0 0 ' + width + ' ' + height, width: width, height: height,
      'aria-label': 'Timeline of ' + viewer.id + ': ' + tasks.length + ' steps over ' + fmtDur(t1 - t0) });
    // axis and grid
    var axis = svg('g', { class: 'axis' });
    var step = niceStep(span, Math.max(3, Math.floor(plotW / 110)));
    for (var v = 0; v <= span + 1e-9; v += step) {
      var gx = x(t0 + v);
      axis.appendChild(svg('line', { class: 'gridline', x1: round(gx), x2: round(gx), y1: top - 4, y2: height - 4 }));
      axis.appendChild(svg('text', { x: round(gx), y: 12, 'text-anchor': 'middle', text: fmtOffset(v, step) }));
    }
    root.appendChild(axis);
    // rows
    var rowsG = svg('g', { class: 'rows' });
    function rowY(i) { return top + i * rowH; }
    for (var r = 0; r < rows; r++) {
      rowsG.appendChild(svg('rect', { class: 'row-bg', x: labelW, y: rowY(r) + 2, width: plotW, height: rowH - 4, rx: 3 }));
    }
    root.appendChild(rowsG);

    // row 0: the run's phases (routing, planning, synthesis)
    var runRow = svg('g', { class: 'row run-row', 'data-row': 'run' },
      svg('text', { class: 'row-label', x: 8, y: rowY(0) + rowH / 2 + 4, text: 'run' }));
    var first = function (re) { for (var i = 0; i < evs.length; i++) if (re.test(evs[i].event_type)) return evs[i]; return null; };
    var routed = first(/^routing\.decided$/), planned = first(/^(plan\.received|react\.started|supervisor\.decomposed)$/);
    var synth = first(/^synthesis\.started$/), fin = finishedEvent(evs);
    var phases = [];
    if (routed) phases.push(['routing', t0, routed.t]);
    if (planned) phases.push(['planning', routed ? routed.t : t0, planned.t]);
    if (synth) phases.push(['synthesis', synth.t, fin ? fin.t : t1]);
    phases.forEach(function (ph) {
      var px = x(ph[1]), pw = Math.max(2, x(ph[2]) - px);
      runRow.appendChild(svg('rect', { class: 'phase phase-' + ph[0], x: round(px), y: rowY(0) + (rowH - barH) / 2, width: round(pw), height: barH, rx: 2 },
        tip(ph[0] + ' · ' + fmtDur(ph[2] - ph[1]))));
      if (pw > ph[0].length * 6.5 + 6) {
        runRow.appendChild(svg('text', { class: 'phase-label', x: round(px + 4), y: rowY(0) + rowH / 2 + 4, text: ph[0] }));
      }
    });
    root.appendChild(runRow);

    // one row per task: a bar from its start to its finish, skill calls as ticks
    tasks.forEach(function (t, i) {
      var y = rowY(i + 1), skills = (t.skills || []).join(', ');
      var label = (t.step ? 'step ' + t.step : truncate(t.id, 14)) + (skills ? ' · ' + skills : '');
      var g = svg('g', { class: 'row task-row', 'data-task-id': t.id },
        svg('text', { class: 'row-label', x: 8, y: y + rowH / 2 + 4, text: truncate(label, 26) },
          tip(label + (t.planStep && t.planStep.task ? '\n' + t.planStep.task : ''))));
      if (t.first !== undefined) {
        var start = t.start !== undefined ? t.start : t.first;
        var end = t.end !== undefined ? t.end : t.finish !== undefined ? t.finish : viewer.live ? t1 : t.last;
        var status = barStatus(t);
        var bx = x(start), bw = Math.max(3, x(end) - bx);
        var bar = svg('rect', { class: 'bar ' + status, x: round(bx), y: y + (rowH - barH) / 2, width: round(bw), height: barH, rx: 3,
          tabindex: 0, 'data-task-id': t.id, 'data-step': t.step || '', 'data-status': status },
          tip((t.step ? 'step ' + t.step : t.id) + ' · ' + status + ' · ' + fmtDur(end - start) + (skills ? ' · ' + skills : '')));
        bar.addEventListener('click', function () { selectDetail('task:' + t.id); });
        bar.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); selectDetail('task:' + t.id); } });
        g.appendChild(bar);
        if (bw > 60) {
          g.appendChild(svg('text', { class: 'muted', x: round(bx + bw + 4), y: y + rowH / 2 + 4, text: fmtDur(end - start) }));
        }
        t.calls.forEach(function (c) {
          var cx = x(c.t), bad = c.outcome === 'error';
          g.appendChild(svg('line', { class: 'tick-skill' + (bad ? ' error' : ''), x1: round(cx), x2: round(cx), y1: y + 3, y2: y + rowH - 3 },
            tip('skill ' + (c.skill_id || '') + ' · ' + (c.outcome || '') + ' · ' + fmtDur(c.duration_ms))));
        });
      } else {
        g.appendChild(svg('text', { class: 'muted', x: labelW + 6, y: y + rowH / 2 + 4, text: (t.planStep && t.planStep.status) || 'pending' }));
      }
      root.appendChild(g);
    });

    // markers across the rows: replans, gates and the finish
    var markers = svg('g', { class: 'markers' }), lastLabelX = [-1e9, -1e9];
    function marker(ev, kind, text) {
      var mx = round(x(ev.t));
      markers.appendChild(svg('line', { class: 'marker-' + kind, x1: mx, x2: mx, y1: 17, y2: height - 4 },
        tip(ev.event_type + ' · ' + fmtOffset(ev.t - t0, 1))));
      var lane = mx - lastLabelX[0] > text.length * 6.5 + 4 ? 0 : 1;
      if (lane === 1 && mx - lastLabelX[1] <= text.length * 6.5 + 4) return;
      lastLabelX[lane] = mx;
      var flip = mx + 3 + text.length * 6.5 > width; // near the right edge: label left of the line
      markers.appendChild(svg('text', { class: 'marker-label ' + kind, x: flip ? mx - 3 : mx + 3, y: 28 + lane * 11,
        'text-anchor': flip ? 'end' : 'start', text: text }));
    }
    evs.forEach(function (ev) {
      if (REPLAN_EVENT.test(ev.event_type)) marker(ev, 'replan', ev.event_type === 'replan.triggered' ? 'replan' : 'revised');
      else if (GATE_EVENT.test(ev.event_type)) marker(ev, 'gate', ev.event_type.replace(/[._]/g, ' '));
      else if (ev.event_type === 'run.finished') marker(ev, 'end', ev.outcome || 'finished');
    });
    root.appendChild(markers);
    box.appendChild(root);
  }

  // ---- the DAG ---------------------------------------------------------------

  var NODE_W = 138, NODE_H = 44, GAP_X = 46, GAP_Y = 14, PAD = 12;

  function nodeText(n, outCount) {
    var d = n.data || {};
    switch (n.kind) {
      case 'routing': return ['routing', [d.task_type, d.pattern].filter(Boolean).join(' · ')];
      case 'plan': {
        var ev = d.event || 'plan';
        var title = ev === 'plan.revised' ? 'replan' : ev === 'react.started' ? 'react' :
          /^supervisor\./.test(ev) ? 'supervisor' : 'plan';
        return [title, d.steps !== undefined ? d.steps + ' steps' : ev];
      }
      case 'group': return ['group', outCount + (outCount === 1 ? ' member' : ' members') + (d.joined ? ' · joined' : '')];
      case 'step': return ['step ' + (d.step || ''), (d.skills || []).join(', ') || (d.status || '')];
      case 'lane': return ['lane ' + (d.lane || d.step || ''), (d.skills || []).join(', ') || (d.status || '')];
      case 'gate': return ['gate', d.kind || d.decision || d.status || ''];
      case 'replan': return ['replan', d.trigger || d.reason || ''];
      case 'synthesis': return ['synthesis', d.derived_from ? 'from ' + d.derived_from.length + ' steps' : ''];
      case 'answer': return [d.terminal_code || 'answer', d.status || ''];
      default: return [n.kind || 'node', n.id];
    }
  }

  function nodeShape(kind, w, h) {
    switch (kind) {
      case 'routing':
        return svg('polygon', { class: 'shape', points: [[12, 0], [w - 12, 0], [w, h / 2], [w - 12, h], [12, h], [0, h / 2]].join(' ') });
      case 'gate':
        return svg('polygon', { class: 'shape', points: [[10, 0], [w - 10, 0], [w, 10], [w, h - 10], [w - 10, h], [10, h], [0, h - 10], [0, 10]].join(' ') });
      case 'synthesis':
        return svg('ellipse', { class: 'shape', cx: w / 2, cy: h / 2, rx: w / 2, ry: h / 2 });
      case 'group':
        return svg('rect', { class: 'shape', width: w, height: h, rx: h / 2 });
      case 'answer':
        return svg('rect', { class: 'shape', width: w, height: h, rx: 12 });
      case 'plan': case 'replan':
        return svg('rect', { class: 'shape', width: w, height: h, rx: 3 });
      default:
        return svg('rect', { class: 'shape', width: w, height: h, rx: 7 });
    }
  }

  // layout places nodes in layers by their longest path from a source
  // (topological depth), ordered within a layer by their parents' places.
  function layout(nodes, edges) {
    var index = {}, parents = {}, children = {}, indeg = {};
    nodes.forEach(function (n, i) { index[n.id] = i; parents[n.id] = []; children[n.id] = []; indeg[n.id] = 0; });
    edges.forEach(function (e) {
      if (index[e.from] === undefined || index[e.to] === undefined || e.from === e.to) return;
      parents[e.to].push(e.from); children[e.from].push(e.to); indeg[e.to]++;
    });
    var depth = {}, queue = nodes.filter(function (n) { return indeg[n.id] === 0; }).map(function (n) { return n.id; });
    queue.forEach(function (id) { depth[id] = 0; });
    var seen = 0;
    while (queue.length) {
      var id = queue.shift(); seen++;
      children[id].forEach(function (c) {
        depth[c] = Math.max(depth[c] || 0, depth[id] + 1);
        if (--indeg[c] === 0) queue.push(c);
      });
    }
    var maxD = 0;
    Object.keys(depth).forEach(function (k) { maxD = Math.max(maxD, depth[k]); });
    if (seen < nodes.length) { // a cycle: put what is left after the rest
      nodes.forEach(function (n) { if (depth[n.id] === undefined || indeg[n.id] > 0) depth[n.id] = maxD + 1; });
      maxD++;
    }
    var layers = [];
    for (var d = 0; d <= maxD; d++) layers.push([]);
    nodes.forEach(function (n) { layers[depth[n.id]].push(n.id); });
    var pos = {};
    layers.forEach(function (layer, d) {
      if (d > 0) {
        layer.sort(function (a, b) {
          return (bary(a) - bary(b)) || (index[a] - index[b]);
        });
      }
      layer.forEach(function (id, i) { pos[id] = i; });
    });
    function bary(id) {
      var ps = parents[id].filter(function (p) { return pos[p] !== undefined; });
      if (!ps.length) return index[id] / 1000;
      return ps.reduce(function (s, p) { return s + pos[p]; }, 0) / ps.length;
    }
    var tallest = Math.max.apply(null, layers.map(function (l) { return l.length; }));
    var height = tallest * (NODE_H + GAP_Y) - GAP_Y + 2 * PAD + 4;
    var width = layers.length * (NODE_W + GAP_X) - GAP_X + 2 * PAD;
    var xy = {};
    layers.forEach(function (layer, d) {
      var lh = layer.length * (NODE_H + GAP_Y) - GAP_Y;
      var y0 = PAD + 2 + ((tallest * (NODE_H + GAP_Y) - GAP_Y) - lh) / 2;
      layer.forEach(function (id, i) { xy[id] = { x: PAD + d * (NODE_W + GAP_X), y: y0 + i * (NODE_H + GAP_Y) }; });
    });
    return { xy: xy, width: width, height: height, children: children };
  }

  function renderDAG() {
    var box = $('dag');
    clear(box);
    if (!viewer.id) return;
    if (!viewer.dag) { box.appendChild(el('div', { class: 'empty', text: viewer.failed.dag ? 'The DAG' + UNREAD : 'Loading the DAG…' })); return; }
    var nodes = viewer.dag.nodes || [], edges = (viewer.dag.edges || []).map(function (e) { return { from: e.from, to: e.to }; });
    if (!nodes.length) { box.appendChild(el('div', { class: 'empty', text: 'The trace has no DAG nodes yet.' })); return; }
    // The plan's step dependencies (input_from_step), dashed.
    var ids = {}, stepNode = {};
    nodes.forEach(function (n) { ids[n.id] = 1; });
    var steps = (viewer.plan && viewer.plan.steps) || [];
    steps.forEach(function (s) { if (s.task_id && ids['step/' + s.task_id]) stepNode[s.step_index] = 'step/' + s.task_id; });
    var have = {};
    edges.forEach(function (e) { have[e.from + '→' + e.to] = 1; });
    steps.forEach(function (s) {
      (s.input_from_step || []).forEach(function (dep) {
        var from = stepNode[dep], to = stepNode[s.step_index];
        if (from && to && !have[from + '→' + to]) { edges.push({ from: from, to: to, dep: true }); have[from + '→' + to] = 1; }
      });
    });
    var L = layout(nodes, edges);
    var root = svg('svg', { viewBox: '0 0 ' + L.width + ' ' + L.height, width: L.width, height: L.height,
      'aria-label': 'Provenance DAG of ' + viewer.id + ': ' + nodes.length + ' nodes, ' + edges.length + ' edges' });
    root.appendChild(svg('defs', null,
      svg('marker', { id: 'dag-arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        svg('path', { class: 'arrow', d: 'M0,0 L10,5 L0,10 z' })),
      svg('marker', { id: 'dag-arrow-dep', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        svg('path', { class: 'arrow-dep', d: 'M0,0 L10,5 L0,10 z' }))));
    var edgesG = svg('g', { class: 'edges' });
    edges.forEach(function (e) {
      var a = L.xy[e.from], b = L.xy[e.to];
      if (!a || !b) return;
      var x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2, d;
      if (x2 > x1) {
        var dx = Math.max(16, (x2 - x1) / 2);
        d = 'M' + round(x1) + ',' + round(y1) + ' C' + round(x1 + dx) + ',' + round(y1) + ' ' + round(x2 - dx) + ',' + round(y2) + ' ' + round(x2) + ',' + round(y2);
      } else { // same or earlier layer: loop below
        d = 'M' + round(a.x + NODE_W / 2) + ',' + round(a.y + NODE_H) + ' C' + round(a.x + NODE_W / 2) + ',' + round(a.y + NODE_H + 30) + ' ' +
          round(b.x + NODE_W / 2) + ',' + round(b.y + NODE_H + 30) + ' ' + round(b.x + NODE_W / 2) + ',' + round(b.y + NODE_H);
      }
      edgesG.appendChild(svg('path', { class: 'edge' + (e.dep ? ' dep' : ''), d: d, 'data-from': e.from, 'data-to': e.to,
        'marker-end': e.dep ? 'url(#dag-arrow-dep)' : 'url(#dag-arrow)' }, tip(e.dep ? e.to + ' uses the output of ' + e.from : e.from + ' → ' + e.to)));
    });
    root.appendChild(edgesG);
    var nodesG = svg('g', { class: 'nodes' });
    nodes.forEach(function (n) {
      var p = L.xy[n.id];
      if (!p) return;
      var d = n.data || {}, extra = '';
      var outCount = L.children[n.id].length;
      if (n.kind === 'step' || n.kind === 'lane') {
        var ps = stepOfTask(d.task_id);
        extra = d.status === 'failed' ? ' failed' : d.status ? '' : ps && ps.status === 'awaiting_gate' ? ' waiting' :
          viewer.live ? ' running' : ' unfinished';
      }
      if (n.kind === 'answer') extra = ' ' + codeClass(d.terminal_code);
      if (n.kind === 'plan' && /revised|reiterated/.test(d.event || '')) extra = ' replan';
      var text = nodeText(n, outCount);
      var g = svg('g', { class: 'node kind-' + n.kind + extra + (viewer.selected === 'node:' + n.id ? ' selected' : ''),
        'data-kind': n.kind, 'data-id': n.id, transform: 'translate(' + round(p.x) + ',' + round(p.y) + ')', tabindex: 0, role: 'button',
        'aria-label': n.kind + ' ' + text.join(' ') },
        tip(n.id + '\n' + text.join(' · ')),
        nodeShape(n.kind, NODE_W, NODE_H),
        svg('text', { class: 'title', x: NODE_W / 2, y: 18, 'text-anchor': 'middle', text: truncate(text[0], 20) }),
        svg('text', { class: 'sub', x: NODE_W / 2, y: 33, 'text-anchor': 'middle', text: truncate(text[1], 22) }));
      g.addEventListener('click', function () { selectDetail('node:' + n.id); });
      g.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); selectDetail('node:' + n.id); } });
      nodesG.appendChild(g);
    });
    root.appendChild(nodesG);
    box.appendChild(root);
  }

  // ---- steps and details ---------------------------------------------------

  function renderSteps() {
    var body = $('steps').tBodies[0];
    clear(body);
    var steps = (viewer.plan && viewer.plan.steps) || [];
    if (!viewer.id || !steps.length) {
      body.appendChild(el('tr', null, el('td', { colspan: 5, class: 'muted', text: viewer.id ? 'No steps yet.' : '' })));
      return;
    }
    steps.forEach(function (s) {
      var tr = el('tr', { 'data-task-id': s.task_id || '' },
        el('td', { class: 'num', text: s.step_index }),
        el('td', null, badge(s.status || 'pending', statusClass(s.status)), s.validated ? ' ✓' : ''),
        el('td', { class: 'mono', text: (s.skills || []).join(', ') || '—' }),
        el('td', { text: (s.input_from_step || []).length ? s.input_from_step.map(function (i) { return 'step ' + i; }).join(', ') : '—' }),
        el('td', { class: 'task', title: s.task || '', text: truncate(s.task, 140) + (s.failure_reason ? ' — ' + s.failure_reason : '') }));
      body.appendChild(tr);
    });
  }

  function selectDetail(key) {
    viewer.selected = key;
    Array.prototype.forEach.call(document.querySelectorAll('#dag g.node'), function (g) {
      g.classList.toggle('selected', 'node:' + g.getAttribute('data-id') === key);
    });
    renderDetails();
  }

  function renderDetails() {
    var pre = $('details'), key = viewer.selected;
    if (!viewer.id) { pre.textContent = 'Select a run.'; return; }
    if (!key) { pre.textContent = 'Select a DAG node or a timeline bar.'; return; }
    var out = '';
    if (key.indexOf('node:') === 0) {
      var id = key.slice(5), node = ((viewer.dag && viewer.dag.nodes) || []).filter(function (n) { return n.id === id; })[0];
      if (!node) { pre.textContent = id + ' is not in the DAG.'; return; }
      out = node.kind + '  ' + node.id + '\n';
      var step = stepOfTask((node.data || {}).task_id);
      if (step && step.task) out += '\ntask: ' + step.task + '\n';
      out += '\n' + JSON.stringify(node.data || {}, null, 2);
    } else if (key.indexOf('task:') === 0) {
      var tid = key.slice(5), s = stepOfTask(tid);
      out = 'task ' + tid + (s ? '  (step ' + s.step_index + ', ' + (s.status || '') + ')' : '') + '\n';
      if (s && s.task) out += '\ntask: ' + s.task + '\n';
      var evs = (viewer.events || []).filter(function (e) { return e.task_id === tid; });
      out += '\nevents:\n' + evs.map(function (e) {
        return '  ' + e.ts + '  ' + e.event_type + (e.skill_id ? ' ' + e.skill_id : '') + (e.outcome ? ' → ' + e.outcome : '') +
          (e.duration_ms ? ' (' + e.duration_ms + ' ms)' : '');
      }).join('\n');
    }
    pre.textContent = out;
  }

  function stepOfTask(tid) {
    if (!tid) return null;
    return ((viewer.plan && viewer.plan.steps) || []).filter(function (s) { return s.task_id === tid; })[0] || null;
  }

  // ---- wiring ---------------------------------------------------------------

  function applyTenant(tenant) {
    tenant = (tenant || '').trim();
    if (tenant === state.tenant) return false;
    state.tenant = tenant;
    gen++;
    cache = { health: null, runs: [], alerts: [] };
    clearErrors('');
    tenantHooks.forEach(function (f) { f(tenant); });
    return true;
  }

  function syncForm() {
    $('tenant').value = state.tenant;
    $('api-key').value = apiKey();
    var radio = $('window-' + state.window);
    if (radio) radio.checked = true;
    $('plan-input').value = state.plan;
    $('auto-refresh').checked = state.auto;
  }

  function onURLChange() {
    var u = readURL(), tenantChanged = applyTenant(u.tenant), windowChanged = u.window !== state.window;
    state.window = u.window;
    if (tenantChanged) state.plan = '';
    state.plan = u.plan || state.plan;
    syncForm();
    if (tenantChanged || windowChanged) refreshAll();
    if (tenantChanged || u.plan !== viewer.id) { markSelectedRow(); loadViewer(); }
  }

  function init() {
    var u = readURL();
    state.tenant = u.tenant; state.window = u.window; state.plan = u.plan;
    syncForm();
    writeURL(false);

    $('tenant-form').addEventListener('submit', function (e) {
      e.preventDefault();
      setApiKey($('api-key').value.trim());
      if (applyTenant($('tenant').value)) state.plan = '';
      writeURL(false);
      refreshAll();
      loadViewer();
    });
    $('window-select').addEventListener('change', function (e) {
      if (!e.target || e.target.name !== 'window') return;
      state.window = e.target.value;
      writeURL(false);
      guard('health', 'Fleet health (GET /agent/health)', loadHealth, healthFailed);
    });
    $('auto-refresh').addEventListener('change', function (e) {
      state.auto = e.target.checked;
      if (state.auto) { refreshAll(); loadViewer(); } else { clearTimeout(refreshTimer); clearTimeout(viewer.timer); }
    });
    $('plan-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var id = $('plan-input').value.trim();
      if (id) selectPlan(id, true);
    });
    $('runs').tBodies[0].addEventListener('click', function (e) {
      var tr = e.target.closest('tr[data-plan-id]');
      if (!tr) return;
      e.preventDefault();
      selectPlan(tr.getAttribute('data-plan-id'), true);
    });
    window.addEventListener('popstate', onURLChange);
    window.addEventListener('hashchange', onURLChange);
    var resizeTimer = null;
    window.addEventListener('resize', function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(function () { renderHealth(); renderTimeline(); }, 150);
    });
    window.addEventListener('error', function (e) { reportError('script', 'Dashboard script', e.error || e.message); });
    window.addEventListener('unhandledrejection', function (e) { reportError('script', 'Dashboard script', e.reason); });

    refreshAll();
    if (state.plan) loadViewer();
  }

  // What the page's other scripts (playground.js) share with this one.
  window.agentbus = {
    el: el, clear: clear, badge: badge, truncate: truncate, codeClass: codeClass, statusClass: statusClass,
    parseTS: parseTS, fmtDateTime: fmtDateTime, fmtDur: fmtDur,
    ApiError: ApiError, api: api, authHeaders: authHeaders, failed: failed, unreachable: unreachable,
    reportError: reportError, clearError: clearError,
    tenant: function () { return state.tenant; },
    onTenant: function (f) { tenantHooks.push(f); },
    planHref: planHref,
    openPlan: function (id) { selectPlan(id, true); refreshAll(); }
  };

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
