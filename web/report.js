// The report after a sale (/report?activity=<id>): reads GET /api/v1/admin/activities/{id}/report
// once and draws the totals and the orders per second as SVG, one <circle> a bucket with its
// second and count in data-second and data-orders. The admin token lives in sessionStorage, as
// on the dashboard.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  const activity = new URLSearchParams(location.search).get("activity") || "";
  let token = sessionStorage.getItem("flashsale.admin") || "";

  const setStatus = (text, error = false) => {
    $("status").textContent = text;
    $("status").className = error ? "error" : "muted";
  };
  const time = (ms) => (ms === null ? "—" : new Date(ms).toISOString());
  const seconds = (ms) => (ms === null ? "not sold out" : `${(ms / 1000).toFixed(3)} s`);

  function row(body, cells) {
    const tr = document.createElement("tr");
    for (const cell of cells) {
      const td = document.createElement("td");
      td.textContent = String(cell);
      tr.appendChild(td);
    }
    body.appendChild(tr);
  }

  function svg(name, attributes) {
    const element = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
    return element;
  }

  function drawChart(report) {
    const chart = $("chart");
    chart.replaceChildren();
    const width = 800, height = 240, left = 40, bottom = 20, top = 10;
    const buckets = report.buckets;
    chart.appendChild(svg("line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, stroke: "#888" }));
    chart.appendChild(svg("line", { x1: left, y1: top, x2: left, y2: height - bottom, stroke: "#888" }));
    if (buckets.length === 0) return;
    const first = buckets[0].second, last = buckets[buckets.length - 1].second;
    const span = Math.max(last - first, 1);
    const peak = Math.max(...buckets.map((b) => b.orders), 1);
    const x = (second) => left + ((second - first) / span) * (width - left - 10);
    const y = (orders) => height - bottom - (orders / peak) * (height - bottom - top);
    const label = svg("text", { x: 2, y: top + 10, "font-size": 10 });
    label.textContent = String(peak);
    chart.appendChild(label);
    const points = buckets.map((b) => `${x(b.second).toFixed(1)},${y(b.orders).toFixed(1)}`).join(" ");
    chart.appendChild(svg("polyline", { points, fill: "none", stroke: "#1f7a3a" }));
    for (const b of buckets) {
      const point = svg("circle", {
        class: "point", cx: x(b.second).toFixed(1), cy: y(b.orders).toFixed(1), r: 3, fill: "#1f7a3a",
        "data-second": b.second, "data-orders": b.orders, "data-units": b.units,
      });
      const title = svg("title", {});
      title.textContent = `${new Date(b.second * 1000).toISOString()}: ${b.orders} orders`;
      point.appendChild(title);
      chart.appendChild(point);
    }
  }

  function show(report) {
    $("activity-name").textContent = `(${report.activity_id}${report.title ? ": " + report.title : ""})`;
    $("step").textContent = String(report.step_s);
    const body = $("totals").querySelector("tbody");
    body.replaceChildren();
    row(body, ["orders", report.orders]);
    row(body, ["units sold / stock", `${report.units_sold} / ${report.stock}`]);
    row(body, ["time to sell out", seconds(report.sell_out_ms)]);
    row(body, ["first order", time(report.first_order_ms)]);
    row(body, ["last order", time(report.last_order_ms)]);
    for (const [state, totals] of Object.entries(report.states)) {
      row(body, [`${state}`, `${totals.orders} orders, ${totals.units} units`]);
    }
    row(body, ["refund due", report.refund_due]);
    row(body, ["compensation due", report.compensation_due]);
    row(body, ["refused by the dead-letter step", report.refused]);
    const answers = $("answers").querySelector("tbody");
    answers.replaceChildren();
    for (const answer of report.answers) row(answers, [answer.status, answer.count]);
    const all = report.answers.reduce((sum, answer) => sum + answer.count, 0);
    const refusals = $("refusals").querySelector("tbody");
    refusals.replaceChildren();
    for (const answer of report.answers.filter((a) => a.refusal).slice(0, 5)) {
      row(refusals, [answer.status, answer.count, `${((100 * answer.count) / Math.max(all, 1)).toFixed(1)} %`]);
    }
    const prizes = $("prizes").querySelector("tbody");
    prizes.replaceChildren();
    for (const prize of report.prizes) row(prizes, [prize.prize_id, prize.name, prize.won]);
    drawChart(report);
  }

  async function load() {
    if (!activity) {
      setStatus("Name the activity: /report?activity=<id>.", true);
      return;
    }
    if (!token) {
      setStatus("Enter the admin token to show the report.");
      return;
    }
    setStatus("Loading…");
    const reply = await FS.request("GET", `/api/v1/admin/activities/${encodeURIComponent(activity)}/report`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    if (reply.status === 401 || reply.status === 403) {
      setStatus("The admin token was refused. Paste the one in <data-dir>/admin-token.", true);
      return;
    }
    if (reply.status !== 200 || !reply.json) {
      const message = (reply.json && (reply.json.message || reply.json.error)) || reply.error || `HTTP ${reply.status}`;
      setStatus(`No report: ${message}`, true);
      return;
    }
    show(reply.json);
    setStatus(`Report of ${activity}.`);
    document.body.dataset.loaded = "true";
  }

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("admin-token").value.trim();
    sessionStorage.setItem("flashsale.admin", token);
    load();
  });
  $("admin-token").value = token;
  load();
})();
