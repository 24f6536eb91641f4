// The buyer page: one activity (?activity=<id>, else "demo", else the first one), a countdown
// driven by the server's clock, one Buy (or Draw) button that sends exactly one request per
// attempt, and a clear message for every answer the service can give.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);

  const INFO_REFRESH_MS = 3000;
  const TICKET_FIRST_DELAY_MS = 500;
  const TICKET_MAX_DELAY_MS = 5000;
  const TICKET_GIVE_UP_MS = 60000;
  const QUEUED = new Set(["queued", "pending", "waiting", "processing"]);

  const state = {
    id: null,
    activity: null, // the definition from GET /api/v1/activities/{id}
    remaining: null,
    soldOut: false,
    offsetMs: 0, // server clock - client clock, from the best (shortest) round trip so far
    bestRttMs: Infinity,
    busy: false, // a request is in flight: the button stays disabled
    blockedUntil: 0, // client time until which a Retry-After holds the button
    idempotencyKey: null, // kept across retries whose outcome is unknown
    refreshing: false,
    identity: null, // "token", "jwt" or "gateway", as GET /api/v1/config says
    // The waiting room (issue 37), when the activity has one.
    room: {
      joined: false,
      polling: false,
      view: null, // the last answer of POST .../join or GET .../wait
      firstAhead: null, // places ahead at the first answer with a place: the progress bar's 0 %
      pass: null, // admitted: sent with the purchase as X-Waiting-Room-Pass
    },
  };

  const serverNow = () => Date.now() + state.offsetMs;
  const isLottery = () => state.activity && state.activity.kind === "lottery";
  const hasRoom = () => !!(state.activity && state.activity.waiting_room);

  // --- Identity: a user name (gateway mode) in localStorage, or a bearer token (token mode). ---

  function loadIdentity() {
    $("user-name").value = localStorage.getItem("flashsale.user") || "";
    $("token").value = localStorage.getItem("flashsale.token") || "";
    const mode = localStorage.getItem("flashsale.idmode") === "token" ? "token" : "user";
    $(mode === "token" ? "mode-token" : "mode-user").checked = true;
    showIdentityMode();
  }

  // The service says which identity it takes (GET /api/v1/config): then the page asks for that
  // one only. An older service without the route leaves the choice to the user.
  async function learnIdentity() {
    const answer = await FS.request("GET", "/api/v1/config");
    const identity = answer.status === 200 && answer.json ? answer.json.identity : null;
    if (identity !== "token" && identity !== "jwt" && identity !== "gateway") return;
    state.identity = identity;
    // The shop's own access token (jwt) is pasted where flashsale's token goes: both are bearers.
    $(identity === "gateway" ? "mode-user" : "mode-token").checked = true;
    $("id-mode-choice").hidden = true;
    showIdentityMode();
  }

  function showIdentityMode() {
    const token = $("mode-token").checked;
    $("user-box").hidden = token;
    $("token-box").hidden = !token;
  }

  function identityHeaders() {
    if ($("mode-token").checked) {
      const token = $("token").value.trim();
      return token ? { Authorization: `Bearer ${token}` } : {};
    }
    const user = $("user-name").value.trim();
    return user ? { "X-User-Id": user } : {};
  }

  $("user-name").addEventListener("input", () => localStorage.setItem("flashsale.user", $("user-name").value.trim()));
  $("token").addEventListener("input", () => localStorage.setItem("flashsale.token", $("token").value.trim()));
  for (const radio of document.querySelectorAll('input[name="id-mode"]')) {
    radio.addEventListener("change", () => {
      localStorage.setItem("flashsale.idmode", $("mode-token").checked ? "token" : "user");
      showIdentityMode();
    });
  }

  // --- The activity and the server clock. ---

  function learnClock(answer) {
    const serverMs = answer.json && Number(answer.json.server_time_ms);
    if (!Number.isFinite(serverMs) || serverMs <= 0) return;
    const rtt = answer.receivedAt - answer.sentAt;
    // The server read its clock somewhere inside the round trip: assume the middle.
    if (rtt <= state.bestRttMs) {
      state.bestRttMs = rtt;
      state.offsetMs = serverMs - (answer.sentAt + rtt / 2);
    }
  }

  async function loadList() {
    const answer = await FS.request("GET", "/api/v1/activities");
    if (answer.status !== 200 || !answer.json) return [];
    learnClock(answer);
    const list = answer.json.activities || [];
    const nav = $("activity-list");
    nav.replaceChildren(
      ...list.map((a) =>
        FS.el("a", {
          href: `/?activity=${encodeURIComponent(a.id)}`,
          "aria-current": a.id === state.id ? "page" : null,
        }, a.title || a.id)),
    );
    return list;
  }

  async function refreshInfo() {
    if (state.refreshing || !state.id) return;
    state.refreshing = true;
    const answer = await FS.request("GET", `/api/v1/activities/${encodeURIComponent(state.id)}`);
    state.refreshing = false;
    if (answer.status === 404) {
      $("page-error").textContent = `There is no activity "${state.id}".`;
      $("activity").hidden = true;
      return;
    }
    if (answer.status !== 200 || !answer.json || !answer.json.activity) {
      $("page-error").textContent = answer.status === 0
        ? `Cannot reach the service (${answer.error}); retrying.`
        : `The service answered HTTP ${answer.status}; retrying.`;
      return;
    }
    $("page-error").textContent = "";
    learnClock(answer);
    state.activity = answer.json.activity;
    state.remaining = answer.json.remaining;
    // Sold out is sticky until the stock grows again (an operator restocked).
    state.soldOut = answer.json.sold_out === true;
    renderInfo();
    render();
  }

  function renderInfo() {
    const a = state.activity;
    $("activity").hidden = false;
    $("title").textContent = a.title || a.id;
    document.title = `${a.title || a.id} · flashsale`;
    $("remaining").textContent = state.remaining === null || state.remaining === undefined ? "–" : state.remaining;
    $("total").textContent = a.total_units !== undefined ? `of ${a.total_units}` : "";
    $("window").textContent = `${FS.time(a.start_ms)} – ${FS.time(a.end_ms)}`;
    $("limit").textContent = isLottery() ? `${a.per_user_limit} draw(s) per person` : `${a.per_user_limit} per person`;
  }

  // --- The button: its label and whether it may be pressed, from the state and the clock. ---

  function phase() {
    const a = state.activity;
    if (!a) return "loading";
    const now = serverNow();
    if (now >= a.end_ms) return "ended";
    if (!a.open) return "closed";
    if (now < a.start_ms) return "before";
    if (state.soldOut) return "sold_out";
    if (hasRoom() && !state.room.pass) return "room";
    return "on";
  }

  function render() {
    const button = $("action");
    const a = state.activity;
    if (!a) return;
    const now = serverNow();
    const verb = isLottery() ? "Draw" : "Buy now";
    const current = phase();
    const blockedFor = state.blockedUntil - Date.now();

    let countdown = "";
    if (current === "before") countdown = `Starts in ${FS.duration(a.start_ms - now)}`;
    else if (current === "on" || current === "sold_out" || current === "room") countdown = `Ends in ${FS.duration(a.end_ms - now)}`;
    else if (current === "ended") countdown = "This sale has ended.";
    else if (current === "closed") countdown = "Closed by the operator for now.";
    $("countdown").textContent = countdown;
    $("countdown").dataset.phase = current;

    let label = verb;
    let enabled = false;
    // An attempt whose outcome is unknown may be sent again whatever the phase: the service
    // answers a key it has seen with that attempt's order as it is now (closed, ended or not).
    const unknownAttempt = state.idempotencyKey !== null;
    if (state.busy) label = isLottery() ? "Drawing…" : "Buying…";
    else if (unknownAttempt && blockedFor <= 0 && current !== "on") {
      label = "Check my last attempt";
      enabled = true;
    } else if (current === "before") label = `Opens in ${FS.duration(a.start_ms - now)}`;
    else if (current === "ended") label = "Ended";
    else if (current === "closed") label = "Closed";
    else if (current === "sold_out") label = isLottery() ? "All prizes gone" : "Sold out";
    else if (current === "room") label = "Wait for your turn";
    else if (blockedFor > 0) label = `Try again in ${Math.ceil(blockedFor / 1000)} s`;
    else enabled = true;

    button.disabled = !enabled;
    button.classList.toggle("loading", state.busy);
    button.setAttribute("aria-busy", state.busy ? "true" : "false");
    if (button.textContent !== label) button.textContent = label;
    renderRoom();
    $("clock").textContent = `Server clock ${state.offsetMs >= 0 ? "+" : "−"}${Math.abs(Math.round(state.offsetMs))} ms from this device.`;
  }

  // --- Answers: one message per outcome the service can give. ---

  // The outcome box: `content` is text and elements; null, undefined and "" (a part the answer
  // does not have) are left out, never shown as text.
  function show(kind, status, ...content) {
    const box = $("outcome");
    box.className = `outcome ${kind}`;
    box.dataset.status = status;
    box.replaceChildren(...content.filter((part) => part !== null && part !== undefined && part !== ""));
  }

  function newKey() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function block(seconds) {
    state.blockedUntil = Date.now() + seconds * 1000;
  }

  // Answers that are not a business outcome: transport, identity, input, availability.
  // True when handled.
  function showServiceProblem(answer) {
    const json = answer.json || {};
    if (answer.status === 0) {
      show("err", "network", `No answer from the service (${answer.error}). `,
        "Whether it went through is unknown: press again to retry safely — the retry carries the same key, so it cannot buy twice.");
      return true;
    }
    if (answer.status === 401) {
      state.idempotencyKey = null;
      const why = json.error ? `: ${json.error}` : "";
      show("err", "unauthorized", state.identity !== "gateway" && $("mode-token").checked
        ? `Not signed in (401 Unauthorized${why}). Paste a valid token above.`
        : `Enter a user name above first (401 Unauthorized${why}).`);
      return true;
    }
    if (answer.status === 400) {
      state.idempotencyKey = null;
      show("err", "bad_request", `The request was refused: ${json.error || "bad request"}.`);
      return true;
    }
    if (answer.status === 503 && json.status === "unknown_outcome") {
      // Sent, and Redis did not answer in time: it may have been taken. The key is kept, so the
      // next press asks again and gets the first outcome rather than a second purchase.
      const seconds = FS.retryAfterSeconds(answer);
      block(seconds);
      show("err", "unknown_outcome",
        `No answer in time: the ${isLottery() ? "draw may have been made" : "purchase may have gone through"}. `,
        `Press again in ${seconds} s to find out — the retry carries the same key, so it cannot ${isLottery() ? "draw" : "buy"} twice.`);
      return true;
    }
    if (answer.status === 503 && json.code !== -8) {
      const seconds = FS.retryAfterSeconds(answer);
      block(seconds);
      show("err", json.status || "unavailable",
        `The service is unavailable for a moment (${json.status || "HTTP 503"}). Try again in ${seconds} s — `,
        "a retry carries the same key, so it cannot buy twice.");
      return true;
    }
    return false;
  }

  function showPurchase(answer) {
    if (showServiceProblem(answer)) return;
    const json = answer.json || {};
    state.idempotencyKey = null; // a definite answer: the next press is a new attempt
    const a = state.activity;
    switch (json.code) {
      case 1: {
        const items = json.items && json.items.length
          ? FS.el("p", {}, "Your code(s): ", ...json.items.map((item) => [FS.el("code", { class: "item" }, item), " "]))
          : null;
        show("ok", "reserved",
          FS.el("strong", {}, "Reserved! "), "Order ", FS.el("code", { id: "order-id" }, json.order_id),
          json.quantity > 1 ? ` (${json.quantity} units)` : "", items,
          json.remaining !== undefined ? FS.el("p", { class: "muted" }, `${json.remaining} left.`) : null,
          typeof json.pay_by_ms === "number"
            ? FS.el("p", { id: "pay-by" }, `Pay by ${FS.time(json.pay_by_ms)}, or the order expires and the unit goes back on sale.`)
            : null);
        if (typeof json.remaining === "number") {
          state.remaining = json.remaining;
          state.soldOut = json.remaining === 0;
          $("remaining").textContent = json.remaining;
        }
        return;
      }
      // A retry with the key of an earlier purchase (replayed): that order as it is now.
      case 3:
        show("ok", "paid", FS.el("strong", {}, "Paid. "), "Order ", FS.el("code", { id: "order-id" }, json.order_id),
          json.quantity > 1 ? ` (${json.quantity} units)` : "", " is paid.");
        return;
      case 4:
        show("warn", "compensation_due", "Order ", FS.el("code", { id: "order-id" }, json.order_id),
          " was sold twice after a failure of the service: you will be compensated.");
        return;
      case -10:
        show("warn", "cancelled", "Order ", FS.el("code", { id: "order-id" }, json.order_id),
          " was cancelled (not paid in time) and its units went back on sale.",
          json.refund_due ? " Your late payment will be refunded." : "");
        return;
      case -11:
        show("err", "refused", "Order ", FS.el("code", { id: "order-id" }, json.order_id),
          " could not be recorded and was cancelled; its units went back on sale.");
        return;
      case 0:
        show("warn", "already_purchased",
          `You already have ${json.bought ?? "your share"} — the limit is ${a.per_user_limit} per person.`);
        return;
      case -9:
        show("warn", "limit_exceeded",
          `That is more than the limit of ${a.per_user_limit} per person allows: you may buy ${json.may_buy ?? "fewer"} more.`);
        return;
      case -1:
        state.soldOut = true;
        state.remaining = 0;
        $("remaining").textContent = "0";
        show("warn", "sold_out", "Sold out: every unit has been taken.");
        return;
      case -2:
        show("warn", "not_started", `Not started yet: the sale opens at ${FS.time(a.start_ms)}.`);
        refreshInfo(); // our clock estimate was early: take a fresh one
        return;
      case -3:
        show("warn", "ended", "This sale has ended.");
        return;
      case -4:
        show("err", "unknown_activity", "There is no such sale (it may have been removed).");
        return;
      case -5:
        show("warn", "closed", "The operator has closed this sale for now. Try again later.");
        refreshInfo();
        return;
      case -6:
        show("err", "conflict", "That order id belongs to someone else; press again.");
        return;
      case -13:
        // The waiting room's pass was refused (expired, most likely): back to the room for a
        // fresh one.
        state.room.pass = null;
        show("warn", "pass_required", `You need your turn in the waiting room first: ${json.error || "no valid pass"}.`);
        if (state.room.joined) pollRoom();
        return;
      case -12:
        // The attempt's key was used for another request (the page makes a new one per attempt).
        show("err", "idempotency_key_reused", "That attempt was refused (its key had been used for another request); press again.");
        return;
      case -7: {
        const seconds = FS.retryAfterSeconds(answer);
        block(seconds);
        show("warn", "rate_limited", `Too many attempts: try again in ${seconds} s.`);
        return;
      }
      case -8: {
        const seconds = FS.retryAfterSeconds(answer);
        block(seconds);
        show("warn", "overloaded", `The service is very busy: try again in ${seconds} s.`);
        return;
      }
      default:
        show("err", "unexpected", `Unexpected answer (HTTP ${answer.status}): ${answer.text.slice(0, 200)}`);
    }
  }

  function showDraw(answer) {
    if (showServiceProblem(answer)) return;
    const json = answer.json || {};
    state.idempotencyKey = null;
    if (json.status === "no_prize") {
      show("warn", "no_prize", "No prize this time. Thanks for playing!");
      return;
    }
    switch (json.code) {
      case 1: {
        const prize = json.prize || {};
        show("ok", "won", FS.el("strong", {}, "You won: "), FS.el("span", { id: "prize-name" }, prize.name || prize.id || "a prize"), "!");
        return;
      }
      case -11: {
        // A replayed (or polled) win the record refused.
        const prize = json.prize || {};
        show("err", "refused", "Your win of ", FS.el("span", { id: "prize-name" }, prize.name || prize.id || "a prize"),
          " could not be recorded and was withdrawn; the prize went back.");
        return;
      }
      case 0:
        show("warn", json.status || "already_drawn", "You have already drawn (or reached your limit of draws).");
        return;
      case -1:
        state.soldOut = true;
        show("warn", json.status || "sold_out", "All prizes are gone.");
        return;
      default:
        showPurchase(answer); // the window, closed, rate limit and overload codes are shared
    }
  }

  // --- Queue mode: 202 + ticket, polled with backoff until an outcome or the deadline. ---

  function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  async function pollTicket(ticketUrl) {
    const giveUpAt = Date.now() + TICKET_GIVE_UP_MS;
    let delay = TICKET_FIRST_DELAY_MS;
    let polls = 0;
    while (Date.now() < giveUpAt) {
      show("warn", "queued", `You are in the queue… (checked ${polls} time${polls === 1 ? "" : "s"})`);
      await sleep(delay);
      delay = Math.min(TICKET_MAX_DELAY_MS, Math.round(delay * 1.6));
      polls += 1;
      const answer = await FS.request("GET", ticketUrl, { headers: identityHeaders(), timeoutMs: 10000 });
      const json = answer.json || {};
      // Still queued, or a passing failure: keep polling until the deadline.
      if (answer.status === 202 || QUEUED.has(json.status)) continue;
      if (answer.status === 0 || answer.status >= 500) continue;
      if (answer.status === 429) {
        delay = Math.max(delay, FS.retryAfterSeconds(answer) * 1000);
        continue;
      }
      if (answer.status === 404) {
        show("err", "ticket_unknown", "The queue no longer knows this ticket (it expired). Draw again to rejoin.");
        return;
      }
      if (answer.status === 200 && typeof json.code === "number") return showDraw(answer);
      show("err", "unexpected", `Unexpected answer while waiting (HTTP ${answer.status}).`);
      return;
    }
    show("warn", "queue_timeout", "Still in the queue after a minute. Your ticket stays valid: press again to check.");
  }

  // --- The waiting room: join once, then long-poll the place until admitted (a pass) or sold out.

  const ROOM_WAIT_MS = 20000;

  function renderRoom() {
    const room = state.room;
    $("room").hidden = !hasRoom();
    if (!hasRoom()) return;
    const view = room.view;
    $("room-join").hidden = room.joined;
    $("room-join").disabled = room.polling;
    $("room-facts").hidden = !view || view.place === null;
    $("room-progress").hidden = !view || view.place === null;
    if (!view) return;
    $("room").dataset.status = view.status;
    let status = "";
    if (view.status === "drawing") {
      status = `You are in the waiting room (${view.waiting} in it). Places are drawn at random when the sale starts, in ${FS.duration(view.start_ms - serverNow())}: arriving earlier gives no advantage.`;
    } else if (view.status === "waiting") {
      status = "You are in line. Keep this page open: it lets you buy when your turn comes.";
    } else if (view.status === "admitted") {
      status = "It is your turn: buy now.";
    } else if (view.status === "sold_out") {
      status = "Sold out: every unit was taken before your turn.";
    } else if (view.status === "not_joined") {
      status = "You have no place in the waiting room: join it.";
    }
    $("room-status").textContent = status;
    if (view.place !== null) {
      // While it waits, the number ahead follows from the place, the start and the rate, as the
      // server computes it (core::AdmittedThrough): counted down here, between the answers.
      const rate = Number(state.activity.waiting_room.admit_per_s);
      let ahead = view.ahead;
      if (view.status === "waiting" && Number.isFinite(rate) && rate > 0 && serverNow() >= view.start_ms) {
        const admitted = Math.floor(((serverNow() - view.start_ms) * rate) / 1000) + 1;
        ahead = Math.max(0, Math.min(view.ahead, view.place - 1 - admitted));
      }
      $("room-place").textContent = `${view.place} of ${view.waiting}`;
      $("room-ahead").textContent = String(ahead);
      const left = view.status === "waiting" ? Math.max(0, view.admit_at_ms - serverNow()) : 0;
      $("room-estimate").textContent = view.status === "waiting" ? FS.duration(left) : "none";
      if (room.firstAhead === null && view.status === "waiting") room.firstAhead = Math.max(1, view.ahead);
      const done = room.firstAhead === null ? 1 : 1 - ahead / room.firstAhead;
      $("room-progress").value = view.status === "waiting" ? Math.round(Math.max(0, Math.min(1, done)) * 100) : 100;
    }
  }

  // An answer of join or wait: the view, or a message for what went wrong. True to keep polling.
  function takeRoomAnswer(answer) {
    const json = answer.json || {};
    if (answer.status === 200 && typeof json.status === "string") {
      state.room.view = json;
      learnClock(answer);
      if (json.status === "not_joined") state.room.joined = false;
      if (json.status === "admitted" && typeof json.pass === "string") {
        state.room.pass = json.pass;
        show("ok", "admitted", FS.el("strong", {}, "Your turn! "), "Press Buy now.");
      }
      if (json.status === "sold_out") {
        state.soldOut = true;
        show("warn", "sold_out", "Sold out: every unit has been taken.");
      }
      render();
      return json.status === "drawing" || json.status === "waiting";
    }
    if (showServiceProblem(answer)) return answer.status === 0 || answer.status >= 500;
    show("err", json.status || "room_error", `The waiting room refused: ${json.error || `HTTP ${answer.status}`}.`);
    return false;
  }

  async function pollRoom() {
    if (state.room.polling) return;
    state.room.polling = true;
    try {
      for (;;) {
        const url = `/api/v1/activities/${encodeURIComponent(state.id)}/wait?wait_ms=${ROOM_WAIT_MS}`;
        const answer = await FS.request("GET", url, { headers: identityHeaders(), timeoutMs: ROOM_WAIT_MS + 10000 });
        if (!takeRoomAnswer(answer)) return;
        if (answer.status !== 200) await sleep(1000);
      }
    } finally {
      state.room.polling = false;
      render();
    }
  }

  async function joinRoom() {
    if (state.room.polling) return;
    const answer = await FS.request("POST", `/api/v1/activities/${encodeURIComponent(state.id)}/join`, { headers: identityHeaders() });
    if (answer.status === 200) state.room.joined = true;
    if (takeRoomAnswer(answer)) pollRoom();
  }

  $("room-join").addEventListener("click", joinRoom);

  // --- The press: one request per attempt; the button is disabled before it leaves. ---

  async function act() {
    const retry = state.idempotencyKey !== null; // an attempt whose outcome is unknown
    if (state.busy || (phase() !== "on" && !retry) || state.blockedUntil > Date.now()) return;
    state.busy = true;
    render();
    try {
      if (!state.idempotencyKey) state.idempotencyKey = newKey();
      const path = isLottery() ? "draw" : "purchase";
      const headers = { ...identityHeaders(), "Idempotency-Key": state.idempotencyKey };
      if (state.room.pass) headers["X-Waiting-Room-Pass"] = state.room.pass;
      const answer = await FS.request("POST", `/api/v1/activities/${encodeURIComponent(state.id)}/${path}`, { headers });
      const json = answer.json || {};
      if (answer.status === 202 && typeof json.ticket_url === "string" && json.ticket_url.startsWith("/api/")) {
        state.idempotencyKey = null;
        await pollTicket(json.ticket_url);
      } else if (isLottery()) {
        showDraw(answer);
      } else {
        showPurchase(answer);
      }
    } finally {
      state.busy = false;
      render();
    }
  }

  $("action").addEventListener("click", act);

  // --- Start. ---

  async function start() {
    loadIdentity();
    await learnIdentity();
    const list = await loadList();
    state.id = params.get("activity") || (list.some((a) => a.id === "demo") ? "demo" : list[0] && list[0].id);
    if (!state.id) {
      $("page-error").textContent = "No activity is on sale yet. Create one from the dashboard.";
      return;
    }
    for (const link of $("activity-list").querySelectorAll("a")) {
      if (link.textContent && link.getAttribute("href") === `/?activity=${encodeURIComponent(state.id)}`) {
        link.setAttribute("aria-current", "page");
      }
    }
    await refreshInfo();
    setInterval(render, 200);
    setInterval(refreshInfo, INFO_REFRESH_MS);
  }

  start();
})();
