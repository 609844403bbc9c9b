(function () {
  "use strict";
  // Draws the conversation and the waterfall from the page's JSON, in chunks as they scroll
  // into view; a step's raw JSON is drawn when it is opened. It writes text only (textContent).
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var CHUNK = 100;
  var MINOR = ["random", "clock", "memory", "state", "timeout", "retry"];
  var observers = [];

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function pretty(v) {
    return typeof v === "string" ? v : JSON.stringify(v, null, 2);
  }
  function secs(d) {
    return d < 1 ? (d * 1000).toFixed(1) + " ms" : d.toFixed(2) + " s";
  }
  function resolve(side, v) {
    if (Array.isArray(v)) return v.map(function (x) { return resolve(side, x); });
    if (v && typeof v === "object") {
      if (Array.isArray(v.$pool)) return v.$pool.map(function (i) { return side.pool[i]; });
      var out = {};
      Object.keys(v).forEach(function (k) { out[k] = resolve(side, v[k]); });
      return out;
    }
    return v;
  }
  function whole(side, s) {
    // The event as recorded: its seq, kind, name and task travel once, on the step.
    var out = { seq: s.q, kind: s.k, name: s.n, task: s.t };
    var x = resolve(side, s.x);
    Object.keys(x).forEach(function (k) { out[k] = x[k]; });
    return out;
  }
  function folded(title, draw) {
    // A <details> whose body is drawn the first time it is opened.
    var box = el("details", "fold");
    add(box, el("summary", null, title));
    box.addEventListener("toggle", function () {
      if (box.open && !box.dataset.drawn) {
        box.dataset.drawn = "1";
        add(box, draw());
      }
    });
    return box;
  }
  function pre(v, cls) {
    return el("pre", cls || "val", pretty(v));
  }
  function field(label, v) {
    var row = el("div", "field");
    return add(row, el("span", "label", label), pre(v));
  }

  // --- messages ---------------------------------------------------------------------------
  function contentParts(content) {
    if (content === null || content === undefined) return [];
    if (typeof content === "string") return [{ text: content }];
    if (!Array.isArray(content)) return [{ json: content }];
    return content.map(function (p) {
      if (typeof p === "string") return { text: p };
      if (p && (p.type === "text" || p.type === "input_text" || p.type === "output_text"))
        return { text: p.text };
      if (p && p.type === "tool_use") return { call: { name: p.name, arguments: p.input, id: p.id } };
      if (p && p.type === "tool_result") return { result: p.content, id: p.tool_use_id };
      return { json: p };
    });
  }
  function toolCallBox(call) {
    var fn = call.function || call;
    var box = el("div", "call");
    add(box, el("span", "callname", "→ " + (fn.name || "?") + "(…)"),
      call.id ? el("small", "callid", call.id) : null);
    var args = fn.arguments;
    if (typeof args === "string") {
      try { args = JSON.parse(args); } catch (e) { /* shown as text */ }
    }
    return add(box, pre(args, "args"));
  }
  function message(msg) {
    if (!msg || typeof msg !== "object") return add(el("div", "msg"), pre(msg));
    var role = String(msg.role || "message");
    var box = el("div", "msg role-" + role.replace(/[^a-z_-]/gi, ""));
    add(box, el("div", "role", role + (msg.tool_call_id ? " · " + msg.tool_call_id : "")));
    contentParts(msg.content).forEach(function (part) {
      if (part.text !== undefined) add(box, el("div", "text", part.text));
      else if (part.call) add(box, toolCallBox(part.call));
      else if (part.result !== undefined) add(box, el("small", "callid", "result of " + part.id), pre(part.result));
      else add(box, pre(part.json));
    });
    (msg.tool_calls || []).forEach(function (call) { add(box, toolCallBox(call)); });
    return box;
  }
  function answer(response) {
    // The normalized model response: {text, tool_calls: [{name, arguments, id}], stop_reason}.
    if (!response || typeof response !== "object") return message({ role: "assistant", content: response });
    var box = message({ role: "assistant", content: response.text, tool_calls: response.tool_calls });
    if (response.stop_reason) add(box, el("small", "stop", "stop: " + response.stop_reason));
    return box;
  }

  // --- steps ------------------------------------------------------------------------------
  function llmBody(side, s, body, seen) {
    var x = s.x;
    var refs = (x.messages && x.messages.$pool) || [];
    var key = s.t;
    var before = seen[key] || {};
    var fresh = refs.filter(function (i) { return !before[i]; });
    var old = refs.length - fresh.length;
    if (old > 0) {
      add(body, folded(old + " earlier message" + (old > 1 ? "s" : ""), function () {
        var box = el("div", "msgs");
        refs.filter(function (i) { return before[i]; }).forEach(function (i) { add(box, message(side.pool[i])); });
        return box;
      }));
    }
    var now = {};
    refs.forEach(function (i) { now[i] = true; });
    seen[key] = now;
    var msgs = el("div", "msgs");
    fresh.forEach(function (i) { add(msgs, message(side.pool[i])); });
    add(body, msgs);
    if (x.error) add(body, el("div", "error", x.error.type + ": " + x.error.message));
    else add(body, answer(x.response));
    var facts = [];
    if (x.params) Object.keys(x.params).forEach(function (k) { facts.push(k + "=" + JSON.stringify(x.params[k])); });
    if (x.usage && x.usage.total_tokens !== undefined) facts.push(x.usage.total_tokens + " tokens");
    if (s.h) facts.push(s.h.method + " " + s.h.url + " → " + (s.h.status || (s.h.error ? s.h.error.type : "")));
    if (facts.length) add(body, el("div", "facts", facts.join(" · ")));
  }
  function stepBody(side, s, body, seen) {
    var x = s.x;
    switch (s.k) {
      case "llm": llmBody(side, s, body, seen); break;
      case "tool":
        add(body, field("arguments", x.args || {}));
        if (x.error) add(body, el("div", "error", x.error.type + ": " + x.error.message));
        else add(body, field("output", x.output === undefined ? null : x.output));
        break;
      case "retrieval":
        add(body, field("query", x.query));
        var docs = el("ol", "docs");
        (x.documents || []).forEach(function (d) {
          var item = el("li", "doc");
          add(item, el("b", null, d.id), d.score !== undefined ? el("span", "score", "score " + d.score) : null,
            el("small", null, " sha256 " + String(d.sha256).slice(0, 12)));
          if (d.content) add(item, el("div", "doctext", d.content));
          if (d.metadata && Object.keys(d.metadata).length) add(item, pre(d.metadata));
          add(docs, item);
        });
        add(body, docs);
        if (x.error) add(body, el("div", "error", x.error.type + ": " + x.error.message));
        break;
      case "http":
        add(body, el("div", "where", x.method + " " + x.url + " → " + (x.status || "")));
        if (x.error) add(body, el("div", "error", x.error.type + ": " + x.error.message));
        if (x.request_body !== undefined) add(body, field("request body", resolve(side, x.request_body)));
        if (x.response_body !== undefined) add(body, field("response body", x.response_body));
        break;
      case "retry":
        add(body, el("div", null, "attempt " + (x.attempt || "?") + ": " + x.outcome +
          (x.error ? " (" + x.error.type + ": " + x.error.message + ")" : "") +
          (x.wait ? ", waited " + secs(x.wait) : "")));
        break;
      case "timeout":
        add(body, el("div", null, "timed out after " + secs(x.after) +
          (x.committed === true ? "; the side effect had committed" : x.committed === false ? "; nothing committed" : "")));
        break;
      case "result":
        if (x.error) add(body, el("div", "error", x.error.type + ": " + x.error.message));
        else add(body, field("final result", x.value === undefined ? null : x.value));
        break;
      case "clock":
        add(body, el("span", "val", new Date(x.value * 1000).toISOString() + " (" + (x.source || "") + ")"));
        break;
      case "memory":
        add(body, el("span", "val", x.op + " " + x.key + (x.value !== undefined ? " = " + JSON.stringify(x.value) : "")));
        break;
      case "state":
        add(body, el("span", "val", (x.source ? x.source + " → " : "") + x.target +
          (x.data && Object.keys(x.data).length ? " " + JSON.stringify(x.data) : "")));
        break;
      default:
        var rest = {};
        Object.keys(x).forEach(function (k) {
          if (["wall", "mono", "fingerprint", "span", "parent_span", "attempt"].indexOf(k) < 0) rest[k] = x[k];
        });
        if (Object.keys(rest).length) add(body, el("span", "val", JSON.stringify(rest)));
    }
  }
  function headline(s) {
    var head = el("div", "head");
    add(head, el("span", "kind k-" + s.k, s.k), el("span", "name", s.n || ""),
      s.x.attempt ? el("span", "attempt", "attempt " + s.x.attempt) : null,
      s.e ? el("span", "err", "error") : null,
      el("span", "dur", s.d ? secs(s.d) : ""), el("span", "seq", "#" + s.q + (s.t !== "main" ? " · " + s.t : "")));
    return head;
  }
  function stepCard(side, index, seen) {
    var s = side.steps[index];
    var minor = MINOR.indexOf(s.k) >= 0 && !s.c.length;
    var card = el("div", "step k-" + s.k + (s.e ? " failed" : "") + (minor ? " minor" : ""));
    card.id = "step-" + side.label.replace(/\W+/g, "-") + "-" + s.q;
    card.dataset.seq = s.q;
    if (s.q === side.mark) {
      card.className += " divergent";
      add(card, el("div", "flag", "first divergent step (see the diff above)"));
    }
    add(card, headline(s));
    var body = el("div", "body");
    stepBody(side, s, body, seen);
    add(card, body);
    if (s.r && s.r.length) add(card, folded(s.r.length + " random draw" + (s.r.length > 1 ? "s" : ""), function () {
      var list = el("ol", "draws");
      s.r.forEach(function (d) {
        add(list, el("li", null, "#" + d.q + (d.t !== "main" ? " [" + d.t + "]" : "") + " " + d.src +
          (d.seed !== undefined ? " seed " + d.seed : "") + (d.v !== undefined ? " = " + JSON.stringify(d.v) : "")));
      });
      return list;
    }));
    if (s.k === "random" && s.r) return card;  // a collapsed row of draws: nothing raw of its own
    add(card, folded("raw JSON", function () {
      var raw = { event: whole(side, s) };
      if (s.h) raw.http = resolve(side, s.h);
      return pre(raw, "raw");
    }));
    if (s.c.length) {
      var kids = el("div", "children");
      s.c.forEach(function (c) { add(kids, stepCard(side, c, seen)); });
      add(card, kids);
    }
    return card;
  }

  // --- lazy lists -------------------------------------------------------------------------
  function lazyList(container, count, drawItem, firstUpTo) {
    var next = 0;
    var sentinel = el("div", "more");
    function more(upTo) {
      var end = Math.min(count, Math.max(next + CHUNK, upTo || 0));
      for (; next < end; next++) container.insertBefore(drawItem(next), sentinel);
      sentinel.textContent = next < count ? (count - next) + " more (scroll to draw them)" : "";
      return next < count;
    }
    container.appendChild(sentinel);
    more(firstUpTo);
    if (next < count && "IntersectionObserver" in window) {
      var watch = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; }) && !more()) watch.disconnect();
      }, { rootMargin: "600px" });
      watch.observe(sentinel);
      observers.push(watch);
    }
  }
  function rootOf(side) {
    var owner = {};
    function walk(i, root) { owner[side.steps[i].q] = root; side.steps[i].c.forEach(function (c) { walk(c, root); }); }
    side.roots.forEach(function (r, n) { walk(r, n); });
    return owner;
  }

  // --- the waterfall ----------------------------------------------------------------------
  function flat(side) {
    var out = [];
    function walk(i, depth) { out.push([i, depth]); side.steps[i].c.forEach(function (c) { walk(c, depth + 1); }); }
    side.roots.forEach(function (r) { walk(r, 0); });
    return out;
  }
  function bar(side, row, end) {
    var s = side.steps[row[0]];
    var line = el("div", "wf" + (s.q === side.mark ? " divergent" : "") + (s.e ? " failed" : ""));
    var label = el("div", "wf-label", (s.n || s.k));
    label.style.paddingLeft = (row[1] * 12 + 4) + "px";
    var track = el("div", "wf-track");
    var b = el("div", "wf-bar k-" + s.k);
    b.style.left = (100 * s.s / end) + "%";
    b.style.width = "max(2px, " + (100 * s.d / end) + "%)";
    b.title = s.k + " " + (s.n || "") + " " + secs(s.d);
    add(track, b);
    return add(line, label, track, el("div", "wf-dur", s.d ? secs(s.d) : ""));
  }
  function lanes(side, box, end) {
    box.textContent = "";
    var tasks = side.tasks;
    var names = el("div", "lane-names");
    tasks.forEach(function (t) { add(names, el("div", "lane-name", t)); });
    var canvas = el("canvas", "lane-canvas");
    add(box, names, canvas);
    function draw() {
      var width = Math.max(200, canvas.clientWidth || 600);
      var lane = 22;
      canvas.width = width;
      canvas.height = tasks.length * lane;
      var ctx = canvas.getContext("2d");
      if (!ctx) return;
      var colors = { llm: "#7950f2", tool: "#1c7ed6", http: "#0ca678", retrieval: "#f08c00" };
      side.steps.forEach(function (s) {
        var y = tasks.indexOf(s.t) * lane;
        ctx.fillStyle = s.q === side.mark ? "#e8590c" : s.e ? "#e03131" : (colors[s.k] || "#adb5bd");
        ctx.fillRect(width * s.s / end, y + 3, Math.max(2, width * s.d / end), lane - 6);
      });
    }
    if ("IntersectionObserver" in window) {
      var watch = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { draw(); watch.disconnect(); }
      });
      watch.observe(canvas);
      observers.push(watch);
    } else draw();
  }

  // --- a side -----------------------------------------------------------------------------
  function show(n) {
    observers.forEach(function (o) { o.disconnect(); });
    observers = [];
    var side = DATA.sides[n];
    document.querySelectorAll(".tab").forEach(function (t) {
      t.classList.toggle("on", Number(t.dataset.side) === n);
    });
    var turns = document.getElementById("turns");
    turns.textContent = "";
    var seen = {};
    var owner = rootOf(side);
    var upTo = side.mark !== null && owner[side.mark] !== undefined ? owner[side.mark] + 1 : 0;
    if (!side.roots.length) add(turns, el("p", "meta", "No steps were recorded."));
    lazyList(turns, side.roots.length, function (i) { return stepCard(side, side.roots[i], seen); }, upTo);
    var end = Math.max(side.end, 1e-6);
    side.steps.forEach(function (s) { end = Math.max(end, s.s + s.d); });
    document.getElementById("wf-side").textContent = side.label + " (" + secs(end) + ")";
    lanes(side, document.getElementById("lanes"), end);
    var bars = document.getElementById("bars");
    bars.textContent = "";
    var rows = flat(side);
    lazyList(bars, rows.length, function (i) { return bar(side, rows[i], end); }, 0);
  }
  document.querySelectorAll(".tab").forEach(function (t) {
    t.addEventListener("click", function () { show(Number(t.dataset.side)); });
  });
  if (DATA.sides.length) show(0);
})();
