// The operator dashboard: every activity's live figures from the admin API, a live chart of
// requests per second by outcome computed from successive /metrics samples, and the admin
// actions (create, open, close, restock). The admin token lives in sessionStorage (this tab).
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const POLL_MS = 1000;
  const SAMPLES = 120; // two minutes of history at one sample a second
  const CHART_ROUTES = new Set(["purchase", "draw"]);
  const COLOURS = {
    reserved: "#1f7a3a", won: "#1f7a3a", no_prize: "#7a8a99", already_purchased: "#9a6200",
    sold_out: "#d6332a", not_started: "#5b6bd6", ended: "#444", closed: "#8a4fbf",
    rate_limited: "#e08a00", overloaded: "#b3261e", unavailable: "#600", unauthorized: "#a0a",
  };
  const EXTRA_COLOURS = ["#0a7ea4", "#c2185b", "#6d4c41", "#00897b", "#5e35b1", "#f4511e"];

  let token = sessionStorage.getItem("flashsale.admin") || "";
  let offsetMs = 0; // server clock - client clock
  let timer = null;
  let previous = null; // {at, counts: Map(status -> total)}
  const history = []; // [{at, rates: Map(status -> per second)}]
  const seenStatuses = [];

  const auth = () => ({ Authorization: `Bearer ${token}` });
  const setStatus = (text, error = false) => {
    $("status").textContent = text;
    $("status").className = error ? "error" : "muted";
  };

  // --- /metrics: flashsale_http_requests_total{route="purchase",status="reserved"} 12 ---

  function parseRequestCounters(text) {
    const counts = new Map();
    const pattern = /^flashsale_http_requests_total\{([^}]*)\}\s+([0-9.eE+]+)\s*$/;
    for (const line of text.split("\n")) {
      const match = pattern.exec(line);
      if (!match) continue;
      const labels = {};
      for (const pair of match[1].matchAll(/(\w+)="([^"]*)"/g)) labels[pair[1]] = pair[2];
      if (!CHART_ROUTES.has(labels.route)) continue;
      counts.set(labels.status, (counts.get(labels.status) || 0) + Number(match[2]));
    }
    return counts;
  }

  function addSample(counts, at) {
    if (previous) {
      const seconds = Math.max(0.001, (at - previous.at) / 1000);
      const rates = new Map();
      for (const [status, total] of counts) {
        // A counter that went down means the server restarted: count from zero.
        const delta = total - (previous.counts.get(status) || 0);
        rates.set(status, (delta >= 0 ? delta : total) / seconds);
        if (!seenStatuses.includes(status)) seenStatuses.push(status);
      }
      history.push({ at, rates });
      if (history.length > SAMPLES) history.shift();
    }
    previous = { at, counts };
  }

  function colour(status) {
    return COLOURS[status] || EXTRA_COLOURS[seenStatuses.indexOf(status) % EXTRA_COLOURS.length];
  }

  function drawChart() {
    const canvas = $("chart");
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 800;
    const height = canvas.clientHeight || 220;
    if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
    if (canvas.height !== Math.round(height * ratio)) canvas.height = Math.round(height * ratio);
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);

    const left = 44, right = 8, top = 8, bottom = 18;
    let max = 1;
    for (const sample of history) for (const rate of sample.rates.values()) max = Math.max(max, rate);
    max = niceCeiling(max);
    const x = (i) => left + ((width - left - right) * i) / Math.max(1, SAMPLES - 1);
    const y = (v) => top + (height - top - bottom) * (1 - v / max);

    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#5d6678";
    g.strokeStyle = "#d9dde6";
    g.lineWidth = 1;
    for (const fraction of [0, 0.5, 1]) {
      const v = max * fraction;
      g.beginPath();
      g.moveTo(left, y(v));
      g.lineTo(width - right, y(v));
      g.stroke();
      g.fillText(formatRate(v), 2, y(v) + 4);
    }
    g.fillText(`last ${SAMPLES} s`, left, height - 4);

    const offset = SAMPLES - history.length; // the newest sample sits at the right edge
    g.lineWidth = 2;
    for (const status of seenStatuses) {
      g.strokeStyle = colour(status);
      g.beginPath();
      history.forEach((sample, i) => {
        const v = sample.rates.get(status) || 0;
        if (i === 0) g.moveTo(x(i + offset), y(v));
        else g.lineTo(x(i + offset), y(v));
      });
      g.stroke();
      if (history.length) {
        // A dot on the newest value, so a line of one sample shows too.
        const last = history[history.length - 1].rates.get(status) || 0;
        g.fillStyle = colour(status);
        g.beginPath();
        g.arc(x(SAMPLES - 1), y(last), 3, 0, 2 * Math.PI);
        g.fill();
      }
    }
    canvas.dataset.samples = String(history.length);

    const latest = history.length ? history[history.length - 1].rates : new Map();
    let total = 0;
    for (const rate of latest.values()) total += rate;
    $("rate-total").textContent = formatRate(total);
    $("legend").replaceChildren(
      ...seenStatuses.map((status) =>
        FS.el("span", { style: `--swatch: ${colour(status)}`, "data-status": status },
          `${status} ${formatRate(latest.get(status) || 0)}/s`)),
    );
  }

  function niceCeiling(v) {
    const power = 10 ** Math.floor(Math.log10(v));
    for (const step of [1, 2, 5, 10]) if (v <= step * power) return step * power;
    return 10 * power;
  }

  function formatRate(v) {
    return v >= 100 ? String(Math.round(v)) : v.toFixed(v >= 10 ? 1 : 2).replace(/\.?0+$/, "") || "0";
  }

  // --- The activity table. ---

  function value(v) {
    return v === null || v === undefined ? "–" : String(v);
  }

  function reconciliation(state) {
    const r = state.reconciliation;
    if (r === null || r === undefined) return "not available";
    if (typeof r === "string") return r;
    if (typeof r.drift === "number") {
      // The last reconciliation report: the invariant holds (drift 0) or by how much it does not.
      const repaired = (r.returned || 0) + (r.reappended || 0);
      let text = r.drift === 0 ? "ok (drift 0)" : `drift ${r.drift}`;
      if (r.rebuilt) text += ", rebuilt";
      if (repaired > 0) text += `, ${repaired} repaired`;
      if (r.loaded === false && !r.rebuilt) text += ", not in Redis";
      if (r.reapplied_orders > 0) text += `, ${r.reapplied_orders} lost orders applied again`;
      if (state.oversold_units > 0) text += `, ${state.oversold_units} units oversold`;
      return text;
    }
    return r.status || r.state || JSON.stringify(r);
  }

  function phase(a, state) {
    if (state && state.frozen) {
      return state.frozen_reason === "sequence_behind"
        ? "frozen (Redis lost writes: repair pending)"
        : "frozen (Redis server changed: repair pending)";
    }
    const now = Date.now() + offsetMs;
    if (now >= a.end_ms) return "ended";
    if (!a.open) return "closed";
    if (now < a.start_ms) return `starts in ${FS.duration(a.start_ms - now)}`;
    return "open";
  }

  const FIELDS = ["state", "remaining", "reserved", "total", "persisted", "lag", "pending",
    "dead_letters", "reconciliation"];

  function figures(state) {
    const a = state.activity;
    const redis = state.redis && state.redis.loaded ? state.redis : null;
    const pipeline = state.pipeline || null;
    const persisted = state.persisted || null;
    return {
      state: phase(a, state),
      remaining: value(redis && redis.remaining),
      // Reserved now: units ever reserved minus those that came back (expired unpaid, cancelled).
      reserved: value(redis && redis.reserved - (redis.released || 0)),
      total: value(redis ? redis.total : a.total_units),
      persisted: value(persisted && persisted.units),
      lag: value(pipeline && pipeline.lag),
      pending: value(pipeline && pipeline.pending),
      dead_letters: value(pipeline && pipeline.dead_letters),
      reconciliation: reconciliation(state),
    };
  }

  // One row per activity, made once and updated in place, so a restock amount being typed
  // survives the refreshes.
  function newRow(a) {
    const restock = FS.el("input", {
      "aria-label": `units to add to ${a.id}`,
      placeholder: a.kind === "items" ? "C1,C2" : "10",
    });
    const toggle = FS.el("button", { type: "button", "data-action": "toggle" });
    toggle.addEventListener("click", () => act(a.id, toggle.dataset.next));
    // A lottery's prize stock is set when it is created: no restock (the API refuses it).
    const restocking = a.kind === "lottery" ? [] : [" ", restock, " ",
      FS.el("button", {
        type: "button", "data-action": "restock",
        onclick: async () => {
          if (await restockActivity(a, restock.value)) restock.value = "";
        },
      }, "restock")];
    return FS.el("tr", { "data-activity": a.id },
      FS.el("td", { "data-field": "id" }, FS.el("a", { href: `/?activity=${encodeURIComponent(a.id)}` }, a.id),
        FS.el("div", { class: "muted" }, `${a.title || ""} · ${a.kind}`)),
      FIELDS.map((field) => FS.el("td", { "data-field": field })),
      FS.el("td", { class: "actions" }, toggle, ...restocking));
  }

  function renderRows(states) {
    const body = $("activities").tBodies[0];
    const existing = new Map([...body.rows].map((row) => [row.dataset.activity, row]));
    const rows = states.map((state) => {
      const a = state.activity;
      const row = existing.get(a.id) || newRow(a);
      const shown = figures(state);
      for (const field of FIELDS) {
        const td = row.querySelector(`[data-field="${field}"]`);
        if (td.textContent !== shown[field]) td.textContent = shown[field];
      }
      const toggle = row.querySelector('[data-action="toggle"]');
      toggle.dataset.next = a.open ? "close" : "open";
      toggle.textContent = toggle.dataset.next;
      return row;
    });
    rows.forEach((row, i) => {
      if (body.rows[i] !== row) body.insertBefore(row, body.rows[i] || null);
    });
    while (body.rows.length > rows.length) body.deleteRow(-1);
  }

  // --- Redis events: when Redis was lost and back, the freeze, what the repair did. ---

  function clock(ms) {
    return ms > 0 ? new Date(ms).toLocaleTimeString() : "–";
  }

  function renderRedis(watch) {
    const state = $("redis-state");
    const list = $("redis-events");
    const events = (watch.events || []).filter((e) => !e.startup);
    const activities = watch.activities || {};
    const frozenNow = activities.frozen || [];
    const text = watch.frozen
      ? "FROZEN: Redis restarted or failed over; purchases and draws wait for the repair."
      : frozenNow.length
        ? `FROZEN: ${frozenNow.map((f) => f.activity_id).join(", ")}: Redis lost writes; ` +
          "their purchases and draws wait for the repair."
        : `Running (epoch ${watch.epoch}); ${events.length ? events.length + " event(s) seen" : "no event seen"}.`;
    if (state.textContent !== text) state.textContent = text;
    state.className = watch.frozen || frozenNow.length ? "error" : "muted";
    // Per activity: frozen because Redis held less of its write sequence than was acknowledged.
    const freezes = frozenNow.concat((activities.recent || []).slice().reverse()).map((f) =>
      `${f.activity_id}: ${f.reason === "sequence_behind" ? "Redis lost writes" : "server changed"}` +
      ` (held ${f.redis_holds.epoch}.${f.redis_holds.seq}, below ${f.floor.epoch}.${f.floor.seq}), ` +
      (f.thawed_ms
        ? `repaired ${clock(f.thawed_ms)} after ${f.thawed_ms - f.since_ms} ms frozen`
        : `frozen since ${clock(f.since_ms)}`) +
      `, ${f.refused} refused; ${f.orders_applied} orders applied again, ` +
      `${f.oversold_units} units oversold`);
    const lines = freezes.concat(events.slice().reverse().map((e) => {
      const r = e.repair || {};
      const activities = (r.activities || []).join(", ") || "none";
      return `lost ${clock(e.lost_ms)}, back ${clock(e.back_ms)}, ` +
        (e.repaired_ms ? `repaired ${clock(e.repaired_ms)}` : "repair pending") +
        `: frozen ${e.frozen_ms} ms (${activities}), ${e.refused} refused; ` +
        `${r.orders_applied || 0} orders (${r.units_applied || 0} units) applied again, ` +
        `${r.rebuilt || 0} rebuilt, ${r.oversold_units || 0} units oversold, ` +
        `${r.acknowledged_lost || 0} acknowledged orders lost`;
    }));
    const shown = [...list.children].map((li) => li.textContent);
    if (shown.join("\n") !== lines.join("\n")) {
      list.replaceChildren(...lines.map((line) => FS.el("li", {}, line)));
    }
  }

  // --- Polling. ---

  async function poll() {
    const [admin, metrics, redis] = await Promise.all([
      FS.request("GET", "/api/v1/admin/activities", { headers: auth(), timeoutMs: 5000 }),
      FS.request("GET", "/metrics", { timeoutMs: 5000 }),
      FS.request("GET", "/api/v1/admin/redis", { headers: auth(), timeoutMs: 5000 }),
    ]);
    if (redis.status === 200 && redis.json) renderRedis(redis.json);
    if (metrics.status === 200) {
      addSample(parseRequestCounters(metrics.text), metrics.receivedAt);
      drawChart();
    }
    if (admin.status === 401) {
      setStatus("The admin token was refused. Paste the one in <data-dir>/admin-token.", true);
      return;
    }
    if (admin.status !== 200 || !admin.json) {
      setStatus(admin.status === 0 ? `Cannot reach the service (${admin.error}).` : `Admin API answered HTTP ${admin.status}.`, true);
      return;
    }
    renderRows(admin.json.activities || []);
    setStatus(`Connected. Updated ${new Date().toLocaleTimeString()}.`);
  }

  async function loop() {
    await poll();
    timer = setTimeout(loop, POLL_MS);
  }

  async function connect() {
    if (timer) clearTimeout(timer);
    timer = null;
    if (!token) {
      setStatus("Enter the admin token to connect.");
      return;
    }
    const clock = await FS.request("GET", "/api/v1/activities");
    if (clock.json && Number.isFinite(clock.json.server_time_ms)) {
      offsetMs = clock.json.server_time_ms - (clock.sentAt + clock.receivedAt) / 2;
    }
    loop();
  }

  // --- Actions. ---

  async function admin(method, path, body) {
    const answer = await FS.request(method, path, {
      headers: { ...auth(), "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (answer.status >= 200 && answer.status < 300) return { ok: true, answer };
    const why = answer.status === 0 ? answer.error : (answer.json && answer.json.error) || `HTTP ${answer.status}`;
    return { ok: false, why, answer };
  }

  async function act(id, action) {
    const result = await admin("POST", `/api/v1/admin/activities/${encodeURIComponent(id)}/${action}`);
    $("action-error").textContent = result.ok ? "" : `${action} ${id}: ${result.why}`;
    poll();
  }

  async function restockActivity(activity, text) {
    const entry = text.trim();
    let body;
    if (activity.kind === "items") {
      const items = entry.split(",").map((s) => s.trim()).filter(Boolean);
      if (!items.length) {
        $("action-error").textContent = `restock ${activity.id}: give item codes separated by commas`;
        return false;
      }
      body = { items };
    } else {
      const units = Number(entry);
      if (!Number.isInteger(units) || units <= 0) {
        $("action-error").textContent = `restock ${activity.id}: give a whole number of units above 0`;
        return false;
      }
      body = { units };
    }
    const result = await admin("POST", `/api/v1/admin/activities/${encodeURIComponent(activity.id)}/stock`, body);
    $("action-error").textContent = result.ok ? "" : `restock ${activity.id}: ${result.why}`;
    poll();
    return result.ok;
  }

  // The create form shows the fields of the kind chosen.
  function showKindFields() {
    const kind = $("new-kind").value;
    $("stock-fields").hidden = kind === "lottery";
    $("lottery-fields").hidden = kind !== "lottery";
    $("pay-field").hidden = kind === "lottery";
  }
  $("new-kind").addEventListener("change", showKindFields);
  showKindFields();

  $("create-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const kind = $("new-kind").value;
    const startsIn = Math.max(0, Number($("new-starts").value) || 0);
    const minutes = Math.max(1, Number($("new-minutes").value) || 60);
    const start = Math.round(Date.now() + offsetMs + startsIn * 1000);
    const body = {
      id: $("new-id").value.trim(),
      title: $("new-title").value.trim() || $("new-id").value.trim(),
      kind,
      per_user_limit: Number($("new-limit").value) || 1,
      open: $("new-open").checked,
      start_ms: start,
      end_ms: start + minutes * 60000,
    };
    if (kind === "items") body.items = $("new-stock").value.split(",").map((s) => s.trim()).filter(Boolean);
    else if (kind === "counted") body.stock = Number($("new-stock").value);
    else {
      // "id:weight:stock" per prize, separated by commas; the name is the id.
      body.prizes = $("new-prizes").value.split(",").map((s) => s.trim()).filter(Boolean).map((entry) => {
        const [id, weight, stock] = entry.split(":").map((s) => s.trim());
        return { id, weight: Number(weight), stock: Number(stock) };
      });
      body.no_prize_weight = Number($("new-no-prize").value) || 0;
      body.admission = $("new-admission").value;
    }
    const paySeconds = Number($("new-pay").value) || 0;
    if (paySeconds > 0 && kind !== "lottery") body.payment_window_ms = Math.round(paySeconds * 1000);
    const perSecond = Number($("new-rate").value) || 0;
    if (perSecond > 0) body.user_rate = { per_second: perSecond, burst: Math.max(1, Number($("new-burst").value) || 1) };
    const result = await admin("POST", "/api/v1/admin/activities", body);
    $("create-result").textContent = result.ok ? `Created ${body.id}.` : `Not created: ${result.why}`;
    $("create-result").className = result.ok ? "muted" : "error";
    if (result.ok) poll();
  });

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("admin-token").value.trim();
    sessionStorage.setItem("flashsale.admin", token);
    connect();
  });

  $("admin-token").value = token;
  drawChart();
  connect();
})();
