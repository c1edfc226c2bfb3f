// route's live view. Plain JavaScript, no build step, nothing from the internet.
// Polls /ui/api/poll about once a second while the tab is visible and redraws what changed.
// Everything from the server goes into the page as text (textContent), never as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const MAX_ROWS = 200;
const MAX_RUNS = 12;
const PALETTE = ["#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#06b6d4", "#ec4899", "#84cc16", "#f97316", "#64748b"];

const view = { seq: 0, pid: null, rows: [], runs: [], panels: null, lastFull: 0, timer: null, polling: false, needHistory: true };
const FLASH_AT_MOST = 10;  // more new rows than this at once: no highlight (a busy proxy would repaint all the time)

// -- helpers -------------------------------------------------------------------------------

function h(tag, attrs, ...kids) {
  const el = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "style") Object.assign(el.style, value);
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

const $ = (id) => document.getElementById(id);

function range(lo, hi) {
  return hi < 1 ? `${Math.round(lo * 1000)}–${Math.round(hi * 1000)} ms` : `${lo.toFixed(1)}–${hi.toFixed(1)} s`;
}

function secs(s) {
  if (s === null || s === undefined) return "–";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  return `${s < 10 ? s.toFixed(2) : s.toFixed(1)} s`;
}

function money(usd) {
  if (usd === null || usd === undefined) return "–";
  if (usd === 0) return "$0";
  if (Math.abs(usd) < 0.01) return `$${Number(usd.toPrecision(2))}`;
  return `$${usd.toFixed(usd < 100 ? 2 : 0)}`;
}

function clock(ts) {
  return new Date(ts * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
}

function pct(x) {
  return x === null || x === undefined ? "–" : `${Math.round(x * 100)}%`;
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function rate(tps) {
  return tps === null || tps === undefined ? "–" : `${tps >= 1000 ? Math.round(tps).toLocaleString() : tps.toFixed(0)} tok/s`;
}

const colours = new Map();
function colourOf(name) {
  if (!colours.has(name)) colours.set(name, PALETTE[colours.size % PALETTE.length]);
  return colours.get(name);
}

// -- polling -------------------------------------------------------------------------------

async function poll() {
  clearTimeout(view.timer);
  if (view.polling) return;  // one at a time: two with the same `after` would add rows twice
  view.polling = true;
  try {
    await pollOnce();
  } finally {
    view.polling = false;
  }
}

async function pollOnce() {
  const full = Date.now() - view.lastFull > 5000;  // breakers and rate limits change with time alone
  let answer;
  try {
    answer = await fetch(`/ui/api/poll?after=${view.seq}${full ? "&full=1" : ""}${view.needHistory ? "&history=1" : ""}`, { credentials: "same-origin", cache: "no-store" });
  } catch (err) {
    setLive("offline", "offline: retrying");
    return schedule(3000);
  }
  if (answer.status === 401) {
    setLive("offline", "signed out");
    showLogin(true);
    return;
  }
  if (!answer.ok) {
    setLive("offline", `error ${answer.status}: retrying`);
    return schedule(3000);
  }
  apply(await answer.json());
  if (full) view.lastFull = Date.now();
  setLive("live", "live");
  schedule(document.hidden ? 5000 : 1000);
}

function schedule(ms) {
  view.timer = setTimeout(poll, ms);
}

function setLive(state, text) {
  const el = $("live");
  el.dataset.state = state;
  el.textContent = text;
}

function apply(data) {
  const restart = data.reset || (view.pid !== null && data.pid !== view.pid);
  if (restart) {
    view.rows = [];
    view.runs = [];
    view.needHistory = true;  // the next poll brings the request log's latest again
    renderRequests();
  }
  view.pid = data.pid;
  view.seq = data.seq;
  showUser(data.auth);
  if (data.requests.length) {
    const first = !view.rows.length;
    view.rows = [...data.requests, ...view.rows].slice(0, MAX_ROWS);
    if (first) renderRequests();
    else addRows(data.requests, data.requests.length <= FLASH_AT_MOST);
  }
  if (data.history) {
    // the request log's latest, from before this process recorded for a page: older than every live row
    view.needHistory = false;
    if (data.history.length) {
      view.rows = [...view.rows, ...data.history].slice(0, MAX_ROWS);
      renderRequests();
    }
  }
  if (data.consortia.length) {
    const known = new Set(view.runs.map((r) => r.seq));
    view.runs = [...data.consortia.filter((r) => !known.has(r.seq)).reverse(), ...view.runs].slice(0, MAX_RUNS);
    renderRuns();
  }
  if (data.backends) {
    view.panels = data;
    renderSources(data.sources, data.seq);
    renderBackends(data.backends, data.log_hour);
    renderCost(data.cost);
    renderLearning(data.learning);
  }
}

// -- sign-in -------------------------------------------------------------------------------

function showUser(auth) {
  const scope = auth.admin ? "" : " (your requests only)";
  $("signed-in").textContent = auth.required ? (auth.key ? `signed in as ${auth.key}${scope}` : "") : "open: this server has no keys";
  $("sign-out").hidden = !auth.required;
}

function showLogin(show) {
  $("login").hidden = !show;
  if (show) $("key").focus();
}

async function signIn(event) {
  event.preventDefault();
  const key = $("key").value.trim();
  const answer = await fetch("/ui/login", {
    method: "POST", credentials: "same-origin", headers: { "content-type": "application/json" }, body: JSON.stringify({ key }),
  });
  $("key").value = "";
  if (answer.ok) {
    $("login-error").textContent = "";
    showLogin(false);
    poll();
  } else {
    const body = await answer.json().catch(() => ({}));
    $("login-error").textContent = body.error ? body.error.message : `sign-in failed (${answer.status})`;
  }
}

async function signOut() {
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin" });
  view.seq = 0;
  view.rows = [];
  view.runs = [];
  view.needHistory = true;
  renderRequests();
  renderRuns();
  poll();
}

// -- requests ------------------------------------------------------------------------------

function statusPill(row) {
  return h("span", { class: `pill ${row.status}` }, row.status);
}

function reasonList(row) {
  return h("ul", { class: "reasons" }, row.reasons.map((line) =>
    h("li", { class: line.startsWith("tried ") ? "fallback" : null }, line)));
}

function requestRow(row, fresh) {
  const open = () => openDetail(row);
  return h("tr", {
    "data-seq": row.seq, tabindex: 0, class: fresh ? "fresh" : null,
    onclick: open, onkeydown: (e) => { if (e.key === "Enter") open(); },
  },
  h("td", { class: "time" }, clock(row.ts)),
  h("td", { class: "nowrap" }, row.protocol),
  h("td", { class: "nowrap" }, row.key || "–"),
  h("td", { class: "nowrap" }, row.requested),
  h("td", { class: "nowrap" }, h("span", { class: "backend-name" }, row.backend || "–"),
    row.tier ? h("span", { class: "tier" }, ` · ${row.tier}`) : null,
    row.consortium ? h("span", { class: "tag" }, "consortium") : null,
    row.simulated ? h("span", { class: "tag sim", title: "the answer came from the simulator: it is fake" }, "SIMULATED") : null),
  h("td", { class: "why" }, reasonList(row),
    row.error ? h("div", { class: "err" }, row.error.split("\n")[0]) : null,
    row.degraded.length ? h("div", { class: "err" }, `degraded: ${row.degraded.join("; ")}`) : null),
  h("td", {}, statusPill(row)),
  h("td", { class: "num" }, secs(row.ttft_s)),
  h("td", { class: "num" }, secs(row.total_s)),
  h("td", { class: "num" }, `${row.tokens.input} → ${row.tokens.output}`),
  h("td", { class: "num" }, money(row.cost_usd)));
}

function renderRequests() {
  $("request-rows").replaceChildren(...view.rows.map((row) => requestRow(row, false)));
}

function addRows(rows, flash) {
  // Only the new rows are built; the oldest beyond MAX_ROWS go.
  const body = $("request-rows");
  body.prepend(...rows.map((row) => requestRow(row, flash)));
  while (body.children.length > MAX_ROWS) body.lastElementChild.remove();
}

// -- one request in full -------------------------------------------------------------------

async function openDetail(row) {
  const dialog = $("detail");
  $("detail-title").textContent = `Request ${row.seq || `log ${row.log_id}`} · ${clock(row.ts)} · ${row.backend || "–"}`;
  $("detail-body").replaceChildren(h("p", { class: "empty" }, "loading…"));
  if (!dialog.open) dialog.showModal();
  const query = new URLSearchParams({ seq: row.seq, ts: row.ts, backend: row.backend || "" });
  if (row.total_s !== null) query.set("total", row.total_s);
  const answer = await fetch(`/ui/api/request?${query}`, { credentials: "same-origin", cache: "no-store" });
  const data = await answer.json().catch(() => ({}));
  $("detail-body").replaceChildren(answer.ok ? detailView(data, row) : h("p", { class: "error" }, data.error ? data.error.message : `error ${answer.status}`));
}

function detailView(data, row) {
  const live = data.row || row;
  const facts = data.facts || [["id", "not in the request log"], ["time", clock(live.ts)], ["backend", live.backend], ["status", live.status]];
  const out = [h("dl", { class: "detail-grid" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))];
  out.push(h("h4", {}, "why"), reasonList(live));
  const d = data.decision || {};
  const candidates = (d.details && d.details.candidates) || [];
  if (candidates.length) {
    out.push(h("h4", {}, `candidates${d.deadline_s ? ` · deadline ${d.deadline_s} s` : ""}`), h("table", { class: "plain" },
      h("thead", {}, h("tr", {}, ["backend", "tier", "p50", "p95", "meets deadline", "breaker", "est. cost"].map((c) => h("th", {}, c)))),
      h("tbody", {}, candidates.map((c) => h("tr", {},
        h("td", {}, c.backend), h("td", {}, c.tier || "–"), h("td", { class: "num" }, secs(c.p50_s)), h("td", { class: "num" }, secs(c.p95_s)),
        h("td", {}, c.meets_deadline ? "yes" : "no"), h("td", {}, c.breaker), h("td", { class: "num" }, money(c.cost_usd)))))));
  }
  if (d.failures && d.failures.length) {
    out.push(h("h4", {}, "fallbacks"), h("ul", { class: "reasons" }, d.failures.map((f) => h("li", { class: "fallback" }, `${f.backend}: ${f.error}: ${f.message}`))));
  }
  for (const name of ["prompt", "thinking", "answer"]) {
    if (name === "thinking" && !data.thinking) continue;
    out.push(h("h4", {}, name), data[name] ? h("pre", { class: "text" }, data[name]) : h("p", { class: "empty" }, `(${data.content_note || "none"})`));
  }
  return h("div", { class: "detail" }, out);
}

// -- sources -------------------------------------------------------------------------------

function renderSources(s, seq) {
  $("sources").replaceChildren(
    h("b", {}, "This view: "), `process ${s.pid} on ${s.host}, since ${clock(s.since)} (${seq} requests) — requests, consortia, observed latency and cost are what it answered; `,
    `requests, consortia and observed latency are kept while a page is open, here since ${s.listed_since ? clock(s.listed_since) : "–"} (before that: the request log's latest, listed after them). `,
    h("b", {}, "Learned latency & breakers: "), `${s.state}. `,
    h("b", {}, "Rate limits: "), `${s.rate_limits}. `,
    h("b", {}, "Request log: "), `${s.log}.`);
}

// -- backends ------------------------------------------------------------------------------

function histogram(obs, learned) {
  // Observed TTFTs in 12 bins from 0 to a little past the slowest (or the learned p95), the
  // learned p50 (solid) and p95 (dashed) drawn on the same axis.
  const w = 200, hgt = 50, bins = 12, values = obs.ttft_s;
  const marks = [learned.ttft_p50_s, learned.ttft_p95_s].filter((v) => v !== null && v !== undefined);
  const lo = 0.8 * Math.min(...values, ...marks, Infinity) || 0;
  const hi = 1.15 * Math.max(...values, ...marks, 1e-3);
  const scale = hi - lo || 1;
  const counts = new Array(bins).fill(0);
  for (const v of values) counts[Math.max(0, Math.min(bins - 1, Math.floor(((v - lo) / scale) * bins)))] += 1;
  const top = Math.max(1, ...counts), bw = w / bins;
  const svg = h("svg:svg", { class: "hist", viewBox: `0 0 ${w} ${hgt}`, preserveAspectRatio: "none", role: "img", "aria-label": "observed time to first token, with the learned p50 and p95 marked" });
  counts.forEach((c, i) => {
    if (!c) return;
    const bh = (c / top) * (hgt - 4);
    svg.append(h("svg:rect", { class: "bar", x: i * bw + 0.5, y: hgt - bh, width: bw - 1, height: bh }));
  });
  for (const [q, cls] of [["ttft_p50_s", "mark50"], ["ttft_p95_s", "mark95"]]) {
    if (learned[q] === null || learned[q] === undefined) continue;
    const x = Math.max(1, Math.min(w - 1, ((learned[q] - lo) / scale) * w));
    svg.append(h("svg:line", { class: cls, x1: x, x2: x, y1: 0, y2: hgt }));
  }
  return [h("div", { class: "chart-label", title: "observed times to first token; the learned p50 (solid) and p95 (dashed) on the same axis" },
    h("span", {}, "TTFT observed"), h("span", {}, range(lo, hi))), svg];
}

function sparkline(values) {
  const w = 200, hgt = 50;
  const svg = h("svg:svg", { class: "spark", viewBox: `0 0 ${w} ${hgt}`, preserveAspectRatio: "none", role: "img", "aria-label": "recent calls: time to first token; red marks a failure" });
  const top = Math.max(1e-3, ...values.filter((v) => v !== null)) * 1.15;
  const step = values.length > 1 ? w / (values.length - 1) : 0;
  const pts = [];
  values.forEach((v, i) => {
    const x = values.length > 1 ? i * step : w / 2;
    if (v === null) svg.append(h("svg:rect", { class: "fail", x: Math.max(0, x - 2), y: hgt - 8, width: 4, height: 8 }));
    else pts.push([x, hgt - 3 - (v / top) * (hgt - 8)]);
  });
  if (pts.length) svg.prepend(h("svg:polyline", { class: "line", points: pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ") }));
  if (pts.length < 12) for (const [x, y] of pts) svg.append(h("svg:circle", { class: "dot", cx: x, cy: y, r: 2 }));
  return [h("div", { class: "chart-label" }, h("span", {}, `last ${plural(values.length, "call")}`), h("span", {}, range(0, top))), svg];
}

function meters(limits) {
  if (!limits.length) return null;
  return h("div", { class: "limits" }, limits.map((l) => {
    const share = Math.max(0, Math.min(1, l.level / l.limit));
    const cls = share <= 0.02 ? "fill empty" : share < 0.25 ? "fill low" : "fill";
    return h("div", { class: "meter", title: `${l.what}: ${l.level} of ${l.limit} left this minute` },
      h("span", {}, l.what), h("div", { class: "track" }, h("div", { class: cls, style: { width: `${share * 100}%` } })),
      h("span", { class: "mono" }, `${Math.max(0, Math.round(l.level))}/${l.limit}`));
  }));
}

function backendCard(b) {
  const L = b.learned, O = b.observed;
  const learnedRate = L.tokens_per_s !== undefined ? rate(L.tokens_per_s) : `${secs(L.canvas_p50_s)}/canvas`;
  const row = (k, a, c) => [h("span", { class: "k" }, k), h("span", {}, a), h("span", {}, c)];
  return h("article", { class: "card", "data-backend": b.name },
    h("header", {}, h("span", { class: "backend-name" }, b.name), h("span", { class: "tag" }, b.kind),
      b.tier ? h("span", { class: "tag" }, `tier ${b.tier}`) : null,
      h("span", { class: `pill ${b.breaker.state}`, title: "circuit breaker" }, `breaker ${b.breaker.state}`)),
    h("div", { class: "sub" }, `${b.model} · ${b.decoding} · $${b.price.input}/$${b.price.output} per Mtok`),
    b.breaker.state === "open" ? h("div", { class: "breaker-note" }, `passed over: one request probes it again in ${b.breaker.reopens_in_s >= 90 ? `${Math.round(b.breaker.reopens_in_s / 60)} min` : secs(b.breaker.reopens_in_s)}`) : null,
    h("div", { class: "figures" },
      h("span", {}), h("span", { class: "h" }, `learned (${plural(L.samples, "sample")})`), h("span", { class: "h" }, `observed (${plural(O.calls, "call")})`),
      row("TTFT p50", secs(L.ttft_p50_s), secs(O.ttft_p50_s)),
      row("TTFT p95", secs(L.ttft_p95_s), secs(O.ttft_p95_s)),
      row("decode", learnedRate, rate(O.decode_tps)),
      row("failures", pct(L.failure_rate), O.calls ? `${pct(O.failure_rate)} (${O.failures})` : "–"),
      row("last hour", plural(b.hour.requests, "request"), money(b.hour.cost_usd))),
    h("div", { class: "charts" }, h("div", {}, histogram(O, L)), h("div", {}, sparkline(O.spark))),
    meters(b.rate_limits));
}

function renderBackends(backends, logHour) {
  $("backend-cards").replaceChildren(...backends.map(backendCard));
  let foot = "";
  if (logHour && logHour.error) foot = `Request log unreadable now: ${logHour.error}`;
  else if (logHour) foot = `Whole request log, last hour (every process writing to it): ${logHour.requests} requests, ${money(logHour.cost_usd)}` +
    (logHour.backends.length ? ` — ${logHour.backends.map((b) => `${b.name} ${b.requests}${b.errors ? ` (${b.errors} errors)` : ""}`).join(", ")}.` : ".");
  $("log-hour").textContent = foot;
}

// -- consortia -----------------------------------------------------------------------------

function runView(run) {
  const span = Math.max(run.wall_s || 0, ...run.rows.map((r) => r.end)) || 1;
  const at = (t) => `${Math.max(0, Math.min(100, (t / span) * 100))}%`;
  const lanes = run.rows.map((r) => {
    const cls = ["span", r.kind === "arbiter" ? "arbiter" : null, r.lost ? "lost" : null, r.status === "cancelled" ? "cancelled" : null].filter(Boolean).join(" ");
    const title = `${r.label}: ${r.status}; start ${secs(r.start)}, ${r.first !== null ? `first token ${secs(r.first)}, ` : ""}end ${secs(r.end)}${r.note ? ` — ${r.note}` : ""}`;
    return [
      h("div", { class: `label${r.kind === "arbiter" ? " arbiter" : ""}`, style: { paddingLeft: `${r.depth * 16}px` }, title }, `${r.depth ? "↳ " : ""}${r.label}`),
      h("div", { class: "lane", title },
        h("div", { class: cls, style: { left: at(r.start), width: at(r.end - r.start) } }),
        r.first !== null ? h("div", { class: "tick", style: { left: at(r.first) } }) : null),
      h("div", { class: `status${r.lost ? " lost" : ""}` }, r.lost ? `✕ ${r.status}` : r.status),
    ];
  });
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => h("span", {
    style: { left: `${f * 100}%`, transform: `translateX(${f === 0 ? 0 : f === 1 ? -100 : -50}%)` } }, secs(f * span)));
  const verdicts = run.verdicts.map((v) => h("div", { class: "verdict" },
    h("b", {}, `round ${v.round}: `), `arbiter ${v.arbiter} ${v.status}`,
    v.ranking.length ? [" · ranking ", h("span", { class: "rank" }, v.ranking.join(" > "))] : null,
    v.confidence !== null && v.confidence !== undefined ? ` · confidence ${v.confidence.toFixed(2)}` : null,
    v.fallback ? h("span", { class: "err" }, ` · ${v.fallback}`) : null));
  return h("article", { class: "run", "data-consortium": run.consortium },
    h("header", {}, h("span", { class: "title" }, run.consortium), h("span", { class: "k" }, clock(run.ts)),
      h("span", {}, h("span", { class: "k" }, "judging "), run.judging),
      h("span", {}, h("span", { class: "k" }, "wall "), secs(run.wall_s)),
      h("span", { class: "budget" }, h("span", { class: "k" }, "budget "), `${run.calls} of ${run.budget ?? "∞"} calls`),
      h("span", {}, h("span", { class: "k" }, "cost "), money(run.cost_usd)),
      run.stopped ? h("span", { class: "k" }, `stopped: ${run.stopped}`) : null),
    verdicts,
    run.degraded.length ? h("ul", { class: "degraded" }, run.degraded.map((d) => h("li", {}, `degraded: ${d}`))) : null,
    h("div", { class: "tl" }, lanes, h("div", {}), h("div", { class: "axis" }, ticks), h("div", {})));
}

function renderRuns() {
  $("consortium-runs").replaceChildren(...view.runs.map(runView));
}

// -- cost ----------------------------------------------------------------------------------

function costBars(cost) {
  // The buckets regrouped into about 30 bars: the window starts at the first traffic (at least
  // two minutes back, at most the hour) and ends now.
  const now = Date.now() / 1000;
  const first = cost.buckets.length ? cost.buckets[0].t : now;
  const span = Math.min(cost.window_s, Math.max(60, now - first + cost.bucket_s));
  const step = Math.max(cost.bucket_s, Math.ceil(span / 30 / cost.bucket_s) * cost.bucket_s);
  const count = Math.ceil(span / step), end = Math.ceil(now / step) * step;
  const bars = Array.from({ length: count }, (_, i) => ({ t: end - (count - i) * step, cost: 0, hosted: 0, backends: {}, keys: {} }));
  for (const b of cost.buckets) {
    const i = count - Math.ceil((end - b.t) / step);
    if (i < 0 || i >= count) continue;
    bars[i].cost += b.cost;
    bars[i].hosted += b.hosted;
    for (const by of ["backends", "keys"]) {
      for (const [name, usd] of Object.entries(b[by])) bars[i][by][name] = (bars[i][by][name] || 0) + usd;
    }
  }
  return { bars, step, end };
}

function niceTop(v) {
  // The axis top: 1, 2, 2.5 or 5 times a power of ten, at or above v.
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((c) => c >= v * 0.999);
}

function ago(seconds) {
  const s = Math.round(seconds);
  if (s < 1) return "now";
  return s < 600 ? `−${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}` : `−${Math.round(s / 60)} min`;
}

function costChart(cost, width, by) {
  // Drawn at the width it is shown at: text in a stretched SVG would stretch too. `by`:
  // "backends" (with always-hosted beside) or "keys".
  const { bars, step, end } = costBars(cost);
  const hosted = by === "backends";
  const w = Math.max(300, width), hgt = 200, pad = 64, bottom = 22, n = bars.length;
  const top = niceTop(Math.max(1e-6, ...bars.map((b) => Math.max(b.cost, hosted ? b.hosted : 0))) * 1.05);
  const bw = (w - pad) / n;
  const y = (v) => hgt - bottom - (v / top) * (hgt - bottom - 10);
  const svg = h("svg:svg", { class: "costchart", width: w, height: hgt, viewBox: `0 0 ${w} ${hgt}`, role: "img", "aria-label": `spend per ${step} s by ${by === "keys" ? "key" : "backend"}` });
  for (const f of [0, 0.5, 1]) {
    svg.append(h("svg:line", { class: "axisline", x1: pad, x2: w, y1: y(f * top), y2: y(f * top) }));
    svg.append(h("svg:text", { x: pad - 8, y: y(f * top) + 4, "text-anchor": "end" }, money(f * top)));
  }
  const every = Math.max(1, Math.round(n / 6));
  bars.forEach((bar, i) => {
    const x = pad + i * bw;
    if ((n - 1 - i) % every === 0) svg.append(h("svg:text", { x: x + bw / 2, y: hgt - 5, "text-anchor": "middle" }, ago(end - bar.t - step)));
    let base = y(0);
    for (const [name, usd] of Object.entries(bar[by])) {
      const bh = y(0) - y(usd);
      if (bh <= 0) continue;
      base -= bh;
      svg.append(h("svg:rect", { x: x + bw * 0.12, y: base, width: Math.max(1, bw * 0.76), height: bh, fill: colourOf(by === "keys" ? `key ${name}` : name) },
        h("svg:title", {}, `${name}: ${money(usd)}`)));
    }
    if (hosted && bar.hosted > 0) svg.append(h("svg:line", { class: "hostedline", x1: x + bw * 0.04, x2: x + bw * 0.96, y1: y(bar.hosted), y2: y(bar.hosted) },
      h("svg:title", {}, `always ${cost.hosted_backend}: ${money(bar.hosted)}`)));
  });
  const per = step < 60 ? `${step} s` : `${step / 60} min`;
  const names = [...new Set(bars.flatMap((b) => Object.keys(b[by])))];
  return h("div", { class: "chart" },
    h("div", { class: "chart-title" }, by === "keys" ? `spend per ${per}, by client key` : `spend per ${per}, by backend`),
    svg,
    h("div", { class: "legend" }, names.map((name) => h("span", {}, h("i", { style: { background: colourOf(by === "keys" ? `key ${name}` : name) } }),
      by === "keys" && name === "-" ? "(no key)" : name)),
      hosted ? h("span", {}, h("i", { class: "dash" }), `the same requests, always ${cost.hosted_backend || "–"}`) : null));
}

function renderCost(cost) {
  const saved = cost.hosted_total - cost.total;
  const half = Math.floor(($("cost-body").clientWidth - 24) / 2);
  const perBackend = new Map();
  for (const b of cost.buckets) for (const [name, usd] of Object.entries(b.backends)) perBackend.set(name, (perBackend.get(name) || 0) + usd);
  $("cost-body").replaceChildren(
    h("div", { class: "cost-top" },
      h("div", {}, h("div", { class: "big" }, money(cost.total)), h("div", { class: "big-label" }, "spent, last hour")),
      h("div", {}, h("div", { class: "big" }, cost.hosted_backend ? money(cost.hosted_total) : "–"),
        h("div", { class: "big-label" }, cost.hosted_backend ? `always ${cost.hosted_backend} (same tokens)` : "no priced top tier")),
      h("div", {}, h("div", { class: "big" }, cost.hosted_backend && cost.hosted_total > 0 ? pct(saved / cost.hosted_total) : "–"),
        h("div", { class: "big-label" }, "saved by routing"))),
    h("div", { class: "charts2" }, costChart(cost, half, "backends"), costChart(cost, half, "keys")),
    h("div", { class: "tables" },
      h("table", { class: "plain" }, h("thead", {}, h("tr", {}, h("th", {}, "backend"), h("th", { class: "num" }, "spend"))),
        h("tbody", {}, [...perBackend].map(([name, usd]) => h("tr", {}, h("td", {}, h("i", { class: "dot", style: { color: colourOf(name) } }, "● "), name), h("td", { class: "num" }, money(usd)))))),
      h("table", { class: "plain keys" }, h("thead", {}, h("tr", {}, ["key", "requests", "spend", "rate limit left"].map((c) => h("th", {}, c)))),
        h("tbody", {}, cost.keys.map((k) => h("tr", { "data-key": k.key }, h("td", {}, h("i", { class: "dot", style: { color: colourOf(`key ${k.key}`) } }, "● "),
          k.key === "-" ? "(no key)" : k.key), h("td", { class: "num" }, k.requests),
          h("td", { class: "num" }, money(k.cost_usd)), h("td", {}, k.rate_limits.map((l) => `${l.what} ${Math.max(0, Math.round(l.level))}/${l.limit}`).join(" · ") || "–")))))));
}

// -- learning ------------------------------------------------------------------------------

function renderLearning(learning) {
  $("learning-body").replaceChildren(h("div", { class: "sections" }, learning.sections.map((s) => h("div", { class: "card" },
    h("h3", {}, s.title),
    h("dl", { class: "facts" }, s.facts.map((f) => [h("dt", {}, f.label), h("dd", {},
      f.value === null ? "not measured yet" : String(f.value),
      f.error !== null && f.error !== undefined ? ` ± ${f.error}` : null,
      f.hint ? h("span", { class: "hint" }, f.hint) : null)])),
    s.note ? h("p", { class: "note" }, s.note) : null))));
}

// -- start ---------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
  poll();
});
