// agentbus dashboard: the playground. Ask a question as the dashboard's
// tenant (and, optionally, one of its agents), follow the run as it
// streams (POST /agent/run with stream: true, then GET
// /agent/runs/{run_id}/stream after a gate), decide its gates from the
// page (POST /agent/runs/{run_id}/approvals/{gate_id}: approve, deny, or
// answer an elicitation) and open it in the run viewer.
// Plain JavaScript; it uses the helpers app.js shares as window.agentbus.
(function () {
  'use strict';

  var D = window.agentbus;
  if (!D) return;
  var el = D.el, clear = D.clear, badge = D.badge;
  var USER_STORAGE = 'agentbus.playgroundUser';
  var RESUME_TRIES = 3; // reconnections of a stream that broke off
  var GATE_POLL_MS = 5000; // a parked run's gates, decided elsewhere?

  var pg = { session: '', sessionAgent: '', agents: [], exchanges: 0, gen: 0, live: [] };

  function $(id) { return document.getElementById(id); }
  function user() { return $('pg-user').value.trim(); }
  // userHeaders name the asker and approver; a credential that binds a
  // user names it itself.
  function userHeaders() { var u = user(); return u ? { 'X-User-Id': u } : {}; }
  function randomID() {
    var a = new Uint8Array(8);
    crypto.getRandomValues(a);
    return Array.prototype.map.call(a, function (b) { return (b < 16 ? '0' : '') + b.toString(16); }).join('');
  }
  function parseJSON(s) { try { return JSON.parse(s); } catch (e) { return null; } }
  function pretty(v) { return typeof v === 'string' ? v : JSON.stringify(v, null, 2); }

  // ---- server-sent events over fetch ----------------------------------------
  // (EventSource cannot POST nor send the tenant and credential headers.)

  // readSSE reads resp's event stream, calling onEvent(id, data) for each
  // event, and resolves when the stream ends.
  function readSSE(resp, onEvent) {
    var reader = resp.body.getReader(), decoder = new TextDecoder(), buf = '';
    var id = '', data = [];
    function line(l) {
      if (l === '') {
        if (data.length) onEvent(id, data.join('\n'));
        id = ''; data = [];
        return;
      }
      if (l.charAt(0) === ':') return;
      var i = l.indexOf(':'), field = i < 0 ? l : l.slice(0, i), value = i < 0 ? '' : l.slice(i + 1);
      if (value.charAt(0) === ' ') value = value.slice(1);
      if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    }
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) { buf += decoder.decode(); if (buf) line(buf); line(''); return; }
        buf += decoder.decode(r.value, { stream: true });
        var lines = buf.split(/\r\n|\r|\n/);
        buf = lines.pop();
        lines.forEach(line);
        return pump();
      });
    }
    return pump();
  }

  // ---- agents ---------------------------------------------------------------

  function loadAgents() {
    var g = ++pg.gen, sel = $('pg-agent'), keep = sel.value;
    return D.api('/agent/agents?status=active').then(function (r) {
      if (g !== pg.gen) return;
      pg.agents = r.agents || [];
      clear(sel);
      sel.appendChild(el('option', { value: '', text: 'none: the tenant’s planner and every skill' }));
      pg.agents.forEach(function (a) {
        sel.appendChild(el('option', { value: a.agent_id, text: a.name + ' (' + (a.type || 'standard') + ')', title: a.description || a.agent_id }));
      });
      sel.value = pg.agents.some(function (a) { return a.agent_id === keep; }) ? keep : '';
      sel.setAttribute('data-loaded', pg.agents.length);
      D.clearError('playground.agents');
    }, function (err) {
      if (g !== pg.gen) return;
      D.reportError('playground.agents', 'Agents (GET /agent/agents)', err);
    });
  }

  // ---- conversations ----------------------------------------------------------

  // newConversation starts the next question in a new session; clearing,
  // it also stops following the runs shown (they go on, in the run viewer).
  function newConversation(clearing) {
    pg.session = '';
    pg.sessionAgent = '';
    if (clearing) {
      pg.live.forEach(function (x) { x.ended = true; clearTimeout(x.poll); x.abort.abort(); });
      pg.live = [];
      clear($('pg-transcript'));
    }
    showContext();
  }

  function showContext() {
    var box = $('pg-context');
    clear(box);
    box.appendChild(el('span', null, 'tenant ', el('strong', { class: 'mono', text: D.tenant() })));
    box.appendChild(el('span', null, ' · session ', el('span', { class: 'mono', id: 'pg-session',
      text: pg.session || 'a new one with the next question' })));
  }

  function ask(question) {
    var agent = $('pg-agent').value;
    // A session keeps its agent: another agent starts another session.
    if (!pg.session || agent !== pg.sessionAgent) {
      pg.session = 'pg-' + randomID();
      pg.sessionAgent = agent;
    }
    showContext();
    var x = newExchange(question, agent);
    var body = { tenant_id: D.tenant(), session_id: pg.session, message: question, stream: true };
    if (user()) body.user_id = user();
    if (agent) body.agent_id = agent;
    var headers = D.authHeaders({ Accept: 'text/event-stream', 'Content-Type': 'application/json' });
    setState(x, 'starting');
    x.streaming = true;
    fetch('/agent/run', { method: 'POST', headers: headers, body: JSON.stringify(body), cache: 'no-store', credentials: 'omit',
      signal: x.abort.signal })
      .then(function (resp) {
        if (!resp.ok) return resp.text().then(function (t) { throw D.failed(resp, t); });
        setRun(x, resp.headers.get('X-Run-Id'), resp.headers.get('X-Plan-Id'));
        setState(x, 'running');
        return readSSE(resp, function (id, data) { onChunk(x, id, data); });
      }, function (err) { throw D.unreachable(err); })
      .then(function () { streamEnded(x); }, function (err) { streamBroke(x, err); });
  }

  // ---- one exchange: the question, its progress, gates and answer -------------

  function newExchange(question, agent) {
    var n = ++pg.exchanges;
    var x = { n: n, runID: '', planID: '', lastID: '', state: '', streaming: false, tries: 0, gates: {}, answers: {},
      tools: {}, poll: null, ended: false, abort: new AbortController() };
    pg.live.push(x);
    var agentName = '';
    pg.agents.forEach(function (a) { if (a.agent_id === agent) agentName = a.name; });
    x.node = el('article', { class: 'pg-exchange', id: 'pg-x' + n, 'data-state': 'starting' },
      el('div', { class: 'pg-q' }, el('span', { class: 'pg-who', text: (user() || 'you') + (agentName ? ' → ' + agentName : '') }),
        el('p', { class: 'pg-question', text: question })),
      x.head = el('div', { class: 'pg-head' }),
      x.status = el('div', { class: 'pg-status', 'aria-live': 'polite' }),
      el('details', { class: 'pg-progress-box', open: 'open' }, el('summary', { text: 'Progress' }),
        x.progress = el('ol', { class: 'pg-progress' })),
      x.gatesBox = el('div', { class: 'pg-gates' }),
      x.answer = el('div', { class: 'pg-answer', 'aria-live': 'polite' }),
      x.result = el('div', { class: 'pg-result' }));
    var list = $('pg-transcript');
    list.insertBefore(x.node, list.firstChild);
    return x;
  }

  function setState(x, s) {
    x.state = s;
    x.node.setAttribute('data-state', s);
    renderHead(x);
  }

  function setRun(x, runID, planID) {
    x.runID = runID || x.runID;
    x.planID = planID || x.planID;
    if (x.runID) x.node.setAttribute('data-run-id', x.runID);
    if (x.planID) x.node.setAttribute('data-plan-id', x.planID);
    renderHead(x);
  }

  var STATE_WORDS = { starting: ['starting', 'neutral'], running: ['running', 'running'], answering: ['answering', 'running'],
    awaiting_gate: ['waits for you', 'warn'], resuming: ['resuming', 'running'], finished: ['finished', 'ok'], failed: ['failed', 'bad'] };

  function renderHead(x) {
    clear(x.head);
    var w = STATE_WORDS[x.state] || [x.state, 'neutral'];
    x.head.appendChild(badge(w[0], w[1]));
    if (x.runID) x.head.appendChild(el('span', { class: 'mono muted', text: ' run ' + x.runID + ' ' }));
    if (x.planID) {
      var link = el('a', { class: 'pg-run-link', href: D.planHref(x.planID), 'data-plan-id': x.planID, text: 'open in the run viewer' });
      link.addEventListener('click', function (e) {
        e.preventDefault();
        D.openPlan(x.planID);
        var v = $('viewer');
        if (v && v.scrollIntoView) v.scrollIntoView({ block: 'start' });
      });
      x.head.appendChild(link);
    }
  }

  function progressItem(x, kind, event, text, title) {
    var li = el('li', { class: 'pg-' + kind, 'data-kind': kind, 'data-event': event || null, title: title || null },
      el('span', { class: 'pg-ev', text: event || kind }), text ? ' ' + text : '');
    x.progress.appendChild(li);
    return li;
  }

  // summary picks the few fields of a progress event's payload worth a line.
  function summary(name, p) {
    if (!p || typeof p !== 'object') return '';
    if (name === 'routing.decided') return [p.task_type, p.pattern].filter(Boolean).join(' · ');
    if (p.skills) return p.skills.join(', ');
    var parts = [];
    ['steps', 'reason', 'trigger', 'outcome', 'kind', 'decision', 'by', 'error'].forEach(function (k) {
      if (p[k] !== undefined && p[k] !== null && p[k] !== '') parts.push(k + ' ' + (typeof p[k] === 'object' ? JSON.stringify(p[k]) : p[k]));
    });
    return D.truncate(parts.join(' · '), 160);
  }

  function onChunk(x, id, data) {
    if (id) x.lastID = id;
    x.tries = 0; // the stream is alive: a later break may reconnect again
    var c = parseJSON(data);
    if (!c) return;
    var content = c.content || '';
    if (x.state === 'resuming' || x.state === 'starting') setState(x, 'running');
    switch (c.message_type) {
      case 'progress': {
        var sp = content.indexOf(' '), name = sp < 0 ? content : content.slice(0, sp);
        var payload = sp < 0 ? null : parseJSON(content.slice(sp + 1));
        progressItem(x, 'event', name, summary(name, payload), sp < 0 ? '' : content.slice(sp + 1));
        break;
      }
      case 'session_progress': {
        var s = parseJSON(content) || {};
        clear(x.status);
        x.status.appendChild(el('span', { text: (s.status || '') + ': ' + (s.completed_step_count || 0) + ' of ' +
          (s.total_step_count || 0) + ' steps done' + ((s.current_steps || []).length ? ', now step ' + s.current_steps.join(', ') : '') }));
        if (s.total_step_count) {
          x.status.appendChild(el('progress', { max: s.total_step_count, value: s.completed_step_count || 0 }));
        }
        if (s.awaiting_gate) showGate(x, s.awaiting_gate);
        break;
      }
      case 'thought':
        progressItem(x, 'thought', 'thought', D.truncate(content, 300), content);
        break;
      case 'observation': {
        var o = parseJSON(content) || {};
        progressItem(x, 'observation', 'observation', 'step ' + o.step_index + ' · ' + o.skill_id + (o.is_error ? ' (error)' : '') +
          ': ' + D.truncate(o.result, 160), o.result);
        break;
      }
      case 'tool_progress': {
        var tp = parseJSON(content) || {}, key = (tp.call_id || '') + '/' + tp.skill_id;
        var text = 'step ' + tp.step_index + ' · ' + tp.skill_id + ' ' + tp.progress + (tp.total ? ' / ' + tp.total : '') +
          (tp.message ? ' — ' + tp.message : '');
        if (x.tools[key]) x.tools[key].lastChild.textContent = ' ' + text;
        else x.tools[key] = progressItem(x, 'tool', 'tool progress', text);
        break;
      }
      case 'answer':
        appendAnswer(x, c.message_id, content);
        break;
      case 'awaiting_gate':
        showGate(x, parseJSON(content));
        break;
      case 'result': case 'error':
        if (c.end_of_dialog) finish(x, c);
        break;
    }
  }

  // appendAnswer adds a piece of the answer as it is written; a new answer
  // message (a synthesis written again) supersedes the one before.
  function appendAnswer(x, msgID, text) {
    var box = x.answers[msgID];
    if (!box) {
      Array.prototype.forEach.call(x.answer.children, function (m) { m.classList.add('superseded'); });
      box = x.answers[msgID] = el('div', { class: 'pg-answer-msg', 'data-message-id': msgID });
      x.answer.appendChild(box);
    }
    if (text) box.appendChild(el('span', { class: 'pg-delta', text: text }));
    if (x.state !== 'answering') setState(x, 'answering');
  }

  function finish(x, c) {
    x.ended = true;
    clearTimeout(x.poll);
    var content = c.content || '';
    if (content.charAt(0) !== '{') {
      fail(x, new D.ApiError(0, 'run_error', content));
      return;
    }
    var r = parseJSON(content) || {};
    setRun(x, r.run_id, r.plan_id);
    var shown = x.answer.querySelector('.pg-answer-msg:not(.superseded)');
    if (r.response && (!shown || shown.textContent.trim() !== r.response.trim())) {
      // Not streamed (or streamed otherwise): the result's answer is the answer.
      Array.prototype.forEach.call(x.answer.children, function (m) { m.classList.add('superseded'); });
      x.answer.appendChild(el('div', { class: 'pg-answer-msg final', text: r.response }));
    }
    clear(x.result);
    var usage = r.usage || {};
    x.result.appendChild(el('span', { class: 'pg-code', 'data-terminal-code': r.terminal_code || '' },
      badge(r.terminal_code, D.codeClass(r.terminal_code)), ' ', badge(r.status, D.statusClass(r.status))));
    x.result.appendChild(el('span', { class: 'muted', text: ' ' + (r.steps || []).length + ' steps · ' + (usage.model_calls || 0) +
      ' model calls · ' + ((usage.input_tokens || 0) + (usage.output_tokens || 0)) + ' tokens' }));
    x.node.setAttribute('data-terminal-code', r.terminal_code || '');
    clear(x.status);
    x.progress.parentNode.open = false; // the answer is what matters now
    Object.keys(x.gates).forEach(function (g) { if (x.gates[g].status === 'open') setGateStatus(x, g, 'closed', 'the run ended'); });
    setState(x, 'finished');
  }

  function fail(x, err) {
    if (x.abort.signal.aborted) return; // the page stopped following it
    x.ended = true;
    clearTimeout(x.poll);
    clear(x.result);
    x.result.appendChild(el('div', { class: 'pg-error', role: 'alert' }, el('code', { text: err.code || 'error' }),
      ' — ' + (err.message || String(err)) + (err.status ? ' (HTTP ' + err.status + ')' : '')));
    setState(x, 'failed');
  }

  // streamEnded: a response ended. After an awaiting_gate chunk the run
  // waits for a decision; any other end without the result reconnects
  // after the last chunk seen, a few times.
  function streamEnded(x) {
    x.streaming = false;
    if (x.ended) return;
    if (openGates(x).length) { waitAtGate(x); return; }
    if (!x.runID || x.tries >= RESUME_TRIES) {
      fail(x, new D.ApiError(0, 'stream_ended', 'the stream ended without the run’s result; see the run viewer'));
      return;
    }
    x.tries++;
    follow(x);
  }

  // streamBroke: a request failed (an error answer, an unreachable
  // ingress: the exchange fails) or a stream broke off while read (it
  // reconnects, as after an end without the result).
  function streamBroke(x, err) {
    x.streaming = false;
    if (x.abort.signal.aborted) return;
    if (err instanceof D.ApiError || !x.runID) fail(x, err);
    else streamEnded(x);
  }

  // follow reads the run's stream on from the last chunk seen.
  function follow(x) {
    if (x.streaming || x.ended) return;
    x.streaming = true;
    clearTimeout(x.poll);
    var path = '/agent/runs/' + encodeURIComponent(x.runID) + '/stream' + (x.lastID ? '?last_event_id=' + encodeURIComponent(x.lastID) : '');
    fetch(path, { headers: D.authHeaders({ Accept: 'text/event-stream' }), cache: 'no-store', credentials: 'omit', signal: x.abort.signal })
      .then(function (resp) {
        if (!resp.ok) return resp.text().then(function (t) { throw D.failed(resp, t); });
        return readSSE(resp, function (id, data) { onChunk(x, id, data); });
      }, function (err) { throw D.unreachable(err); })
      .then(function () { streamEnded(x); }, function (err) { streamBroke(x, err); });
  }

  // ---- gates -------------------------------------------------------------------

  function openGates(x) {
    return Object.keys(x.gates).filter(function (g) { return x.gates[g].status === 'open'; });
  }

  // waitAtGate polls the run's gates while it waits and no stream is
  // open: a gate decided elsewhere (agentbus approve) resumes the page too.
  function waitAtGate(x) {
    setState(x, 'awaiting_gate');
    clearTimeout(x.poll);
    x.poll = setTimeout(function () {
      if (x.streaming || x.ended) return;
      D.api('/agent/runs/' + encodeURIComponent(x.runID) + '/approvals').then(function (r) {
        var moved = false;
        (r.gates || []).forEach(function (v) {
          var id = v.gate_id;
          if (x.gates[id] && x.gates[id].status === 'open' && v.status && v.status !== 'open') {
            setGateStatus(x, id, v.status, (v.decided_by ? 'by ' + v.decided_by : '') + ' (decided elsewhere)');
            moved = true;
          }
        });
        if (moved && !openGates(x).length) { setState(x, 'resuming'); follow(x); } else waitAtGate(x);
      }, function () { waitAtGate(x); });
    }, GATE_POLL_MS);
  }

  function showGate(x, packet) {
    if (!packet || !packet.gate_id) return;
    if (x.gates[packet.gate_id]) {
      if (x.gates[packet.gate_id].status === 'open' && x.state !== 'awaiting_gate') setState(x, 'awaiting_gate');
      return;
    }
    var g = x.gates[packet.gate_id] = { packet: packet, status: 'open', fields: {} };
    var elicit = (packet.actions || []).filter(function (a) { return a.elicitation; });
    g.node = el('section', { class: 'pg-gate', 'data-gate-id': packet.gate_id, 'data-kind': packet.kind || '', 'data-status': 'open',
      'aria-label': 'Gate ' + packet.gate_id },
      el('div', { class: 'pg-gate-head' }, el('strong', { text: elicit.length ? 'A question for you' : 'Approval needed' }), ' ',
        badge(packet.kind || 'gate', 'warn'), el('span', { class: 'mono muted', text: ' ' + packet.gate_id }),
        packet.expires_at ? el('span', { class: 'muted', text: ' · until ' + D.fmtDateTime(D.parseTS(packet.expires_at)) }) : null),
      (packet.actions || []).map(function (a) { return actionView(g, a); }),
      packet.handoff ? el('pre', { class: 'pg-json', text: pretty(packet.handoff) }) : null,
      g.decide = el('div', { class: 'pg-decide' },
        g.comment = el('input', { type: 'text', class: 'pg-comment', placeholder: 'comment (optional)', maxlength: 2048, 'aria-label': 'Comment' }),
        g.approve = el('button', { type: 'button', class: 'pg-approve', text: elicit.length ? 'Answer and approve' : 'Approve' }),
        g.deny = el('button', { type: 'button', class: 'pg-deny secondary', text: 'Deny' })),
      g.msg = el('div', { class: 'pg-gate-msg', 'aria-live': 'polite' }));
    g.approve.addEventListener('click', function () { decide(x, g, 'approve'); });
    g.deny.addEventListener('click', function () { decide(x, g, 'deny'); });
    x.gatesBox.appendChild(g.node);
    setState(x, 'awaiting_gate');
  }

  function actionView(g, a) {
    var box = el('div', { class: 'pg-action', 'data-step': a.step, 'data-action': a.action || '' },
      el('div', null, 'step ' + a.step + ' wants to call ', el('strong', { class: 'mono', text: a.action || '?' }), ' ',
        a.risk ? badge(a.risk, a.risk === 'destructive' ? 'bad' : 'warn') : null),
      a.task ? el('div', { class: 'muted', text: a.task }) : null);
    if (a.parameters !== undefined && a.parameters !== null) {
      box.appendChild(el('div', { class: 'pg-label', text: 'parameters' }));
      box.appendChild(el('pre', { class: 'pg-json pg-params', text: pretty(a.parameters) }));
    }
    if (a.evidence !== undefined && a.evidence !== null) {
      box.appendChild(el('details', { class: 'pg-evidence' }, el('summary', { text: 'evidence' }),
        el('pre', { class: 'pg-json', text: pretty(a.evidence) })));
    }
    if (a.elicitation) box.appendChild(questionForm(g, a));
    return box;
  }

  // questionForm draws an elicitation's requested_schema (a flat object of
  // strings, numbers, integers, booleans and enums) as fields; any other
  // schema gets a JSON box.
  function questionForm(g, a) {
    var q = a.elicitation, schema = q.requested_schema || {}, props = schema.properties || {};
    var required = {};
    (schema.required || []).forEach(function (k) { required[k] = true; });
    var form = el('div', { class: 'pg-question-form', 'data-step': a.step }, el('p', { class: 'pg-ask', text: q.message || '' }));
    var simple = Object.keys(props).length > 0 && Object.keys(props).every(function (k) {
      return ['string', 'number', 'integer', 'boolean'].indexOf(props[k].type) >= 0;
    });
    var fields = g.fields[a.step] = { simple: simple, inputs: {}, props: props, required: required };
    if (!simple) {
      fields.json = el('textarea', { class: 'pg-json-answer', rows: 4, 'aria-label': 'Answer (JSON)', spellcheck: 'false' });
      fields.json.value = '{}';
      form.appendChild(el('label', null, 'answer (JSON matching ', el('code', { text: JSON.stringify(schema) }), ')', fields.json));
      return form;
    }
    Object.keys(props).forEach(function (k) {
      var p = props[k], input, id = 'pg-f-' + g.packet.gate_id + '-' + a.step + '-' + k;
      if (p.enum) {
        input = el('select', { id: id, name: k }, p.enum.map(function (v) { return el('option', { value: v, text: v }); }));
        if (p.default !== undefined) input.value = p.default;
      } else if (p.type === 'boolean') {
        input = el('input', { id: id, name: k, type: 'checkbox' });
        input.checked = !!p.default;
      } else {
        input = el('input', { id: id, name: k, type: p.type === 'string' ? 'text' : 'number',
          step: p.type === 'integer' ? 1 : 'any', min: p.minimum, max: p.maximum, required: required[k] ? 'required' : null,
          placeholder: p.default !== undefined ? String(p.default) : '' });
      }
      fields.inputs[k] = input;
      form.appendChild(el('label', { class: 'pg-field', for: id },
        el('span', { text: (p.title || k) + (required[k] ? ' *' : '') }), input,
        p.description ? el('span', { class: 'muted', text: p.description }) : null));
    });
    return form;
  }

  // answerOf reads a question's fields into the answer's content; fields
  // left empty are left out (the schema's defaults fill them).
  function answerOf(f) {
    if (!f.simple) {
      var v = parseJSON(f.json.value);
      if (!v || typeof v !== 'object' || Array.isArray(v)) throw new D.ApiError(0, 'invalid_answer', 'the answer must be a JSON object');
      return v;
    }
    var out = {};
    Object.keys(f.inputs).forEach(function (k) {
      var input = f.inputs[k], p = f.props[k];
      if (p.type === 'boolean' && !p.enum) { out[k] = input.checked; return; }
      var s = input.value.trim();
      if (s === '') return;
      out[k] = p.type === 'number' || p.type === 'integer' ? Number(s) : s;
    });
    return out;
  }

  function decide(x, g, decision) {
    var body = { decision: decision };
    var comment = g.comment.value.trim();
    if (comment) body.comment = comment;
    try {
      var steps = Object.keys(g.fields);
      if (decision === 'approve' && steps.length === 1) body.content = answerOf(g.fields[steps[0]]);
      if (decision === 'approve' && steps.length > 1) {
        body.answers = {};
        steps.forEach(function (s) { body.answers[s] = answerOf(g.fields[s]); });
      }
    } catch (err) { gateMessage(g, err); return; }
    g.approve.disabled = g.deny.disabled = true;
    g.msg.textContent = decision === 'approve' ? 'approving…' : 'denying…';
    var path = '/agent/runs/' + encodeURIComponent(x.runID) + '/approvals/' + encodeURIComponent(g.packet.gate_id);
    D.api(path, { method: 'POST', body: body, headers: userHeaders() }).then(function (r) {
      setRun(x, r.run_id, r.plan_id);
      setGateStatus(x, g.packet.gate_id, decision === 'approve' ? 'approved' : 'rejected', r.by ? 'by ' + r.by : '');
      if (!openGates(x).length) setState(x, 'resuming');
      follow(x);
    }, function (err) {
      g.approve.disabled = g.deny.disabled = false;
      gateMessage(g, err);
    });
  }

  function gateMessage(g, err) {
    clear(g.msg);
    g.msg.appendChild(el('span', { class: 'pg-error', role: 'alert' }, el('code', { text: err.code || 'error' }), ' — ' + (err.message || String(err))));
  }

  function setGateStatus(x, id, status, note) {
    var g = x.gates[id];
    if (!g) return;
    g.status = status;
    g.node.setAttribute('data-status', status);
    g.approve.disabled = g.deny.disabled = true;
    g.comment.disabled = true;
    clear(g.msg);
    g.msg.appendChild(badge(status, status === 'approved' ? 'ok' : status === 'closed' ? 'neutral' : 'bad'));
    if (note) g.msg.appendChild(el('span', { class: 'muted', text: ' ' + note }));
  }

  // ---- wiring ---------------------------------------------------------------

  function init() {
    var form = $('pg-form');
    if (!form) return;
    try { $('pg-user').value = localStorage.getItem(USER_STORAGE) || $('pg-user').value; } catch (e) { /* storage off */ }
    $('pg-user').addEventListener('change', function () {
      try { localStorage.setItem(USER_STORAGE, user()); } catch (e) { /* storage off */ }
    });
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      var q = $('pg-question').value.trim();
      if (!q) return;
      ask(q);
      $('pg-question').value = '';
    });
    $('pg-question').addEventListener('keydown', function (e) {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
    });
    $('pg-new').addEventListener('click', function () { newConversation(true); });
    $('pg-agents-reload').addEventListener('click', loadAgents);
    D.onTenant(function () { newConversation(true); loadAgents(); });
    showContext();
    loadAgents();
  }

  init();
})();
