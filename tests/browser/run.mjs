// The buyer page, the operator dashboard and the report in a real browser: Debian's chromium driven by
// playwright-core, against a real `flashsale serve --demo` (its own embedded redis-server and
// SQLite in a temporary directory, on a free loopback port). Activities are created through the
// admin API; purchases that are not the page's own go out as plain HTTP requests from here.
//
//   node tests/browser/run.mjs --binary build/asan/src/flashsale [--artifacts DIR] [--chromium PATH]
//
// Screenshots land in --artifacts (default: browser-artifacts/ beside the binary's build tree;
// the run prints where): one per outcome a buyer can see in outcomes/<outcome>.png, whose rendered
// text the tests assert (and never "null", "undefined" or "NaN"). Every wait is bounded; the
// server is stopped by its PID at the end, even after a failure.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { createServer as createHttpServer } from "node:http";
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, openSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";

const { values: args } = parseArgs({
  options: {
    binary: { type: "string" },
    artifacts: { type: "string" },
    chromium: { type: "string", default: process.env.FLASHSALE_CHROMIUM || "/usr/bin/chromium" },
  },
});
if (!args.binary) {
  console.error("usage: node run.mjs --binary path/to/flashsale [--artifacts DIR] [--chromium PATH]");
  process.exit(2);
}
const binary = path.resolve(args.binary);
const artifacts = path.resolve(args.artifacts || path.join(path.dirname(binary), "..", "browser-artifacts"));
const outcomes = path.join(artifacts, "outcomes");
mkdirSync(outcomes, { recursive: true });

const TEST_TIMEOUT_MS = 90_000;
const STARTUP_TIMEOUT_MS = 30_000;
const WAIT_MS = 20_000; // a page reaching an expected state

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// --- The server ---------------------------------------------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// The pids of redis-server processes serving `dataDir` (the embedded server's title names its
// socket there): killed by PID if the service itself had to be killed.
function redisServersFor(dataDir) {
  const pids = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ");
      if (cmdline.includes("redis-server") && cmdline.includes(`${dataDir}/redis.sock`)) pids.push(Number(entry));
    } catch (_) {
      // gone meanwhile
    }
  }
  return pids;
}

class Service {
  // `serve --demo` (gateway identity) unless other flags are given; its log in artifacts/<name>.log.
  constructor(flags = ["--demo"], name = "flashsale") {
    this.flags = flags;
    this.name = name;
  }

  async start() {
    this.dataDir = mkdtempSync(path.join(tmpdir(), "fs-browser-"));
    this.port = await freePort();
    this.base = `http://127.0.0.1:${this.port}`;
    this.logPath = path.join(artifacts, `${this.name}.log`);
    const log = openSync(this.logPath, "w");
    this.child = spawn(binary, [
      "serve", ...this.flags, "--listen", `127.0.0.1:${this.port}`, "--data-dir", this.dataDir, "--threads", "2",
    ], { stdio: ["ignore", log, log] });
    closeSync(log);
    this.exited = new Promise((resolve) => this.child.once("exit", (code, signal) => resolve({ code, signal })));
    const until = Date.now() + STARTUP_TIMEOUT_MS;
    while (Date.now() < until) {
      if (this.child.exitCode !== null) throw new Error(`flashsale exited during startup:\n${this.log()}`);
      const health = await this.http("GET", "/healthz").catch(() => null);
      if (health && health.status === 200) break;
      await sleep(100);
    }
    if (Date.now() >= until) throw new Error(`no 200 from /healthz in time:\n${this.log()}`);
    this.adminToken = readFileSync(path.join(this.dataDir, "admin-token"), "utf8").trim();
  }

  log() {
    try {
      return readFileSync(this.logPath, "utf8");
    } catch (_) {
      return "";
    }
  }

  // SIGTERM (drains, stops its redis-server, exits 0); SIGKILL by PID if it does not exit in time.
  async stop() {
    if (!this.child) return;
    let exit = null;
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill("SIGTERM");
      exit = await Promise.race([this.exited, sleep(30_000).then(() => null)]);
      if (!exit) {
        this.child.kill("SIGKILL");
        await Promise.race([this.exited, sleep(10_000)]);
      }
    }
    for (const pid of redisServersFor(this.dataDir)) process.kill(pid, "SIGKILL");
    rmSync(this.dataDir, { recursive: true, force: true });
    return exit;
  }

  async http(method, target, { body, headers = {} } = {}) {
    const response = await fetch(this.base + target, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await response.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch (_) {
      json = null;
    }
    return { status: response.status, json, text, headers: response.headers };
  }

  admin(method, target, body) {
    return this.http(method, target, { body, headers: { Authorization: `Bearer ${this.adminToken}` } });
  }

  async serverNow() {
    const answer = await this.http("GET", "/api/v1/activities");
    return answer.json.server_time_ms;
  }

  async createActivity(fields) {
    const answer = await this.admin("POST", "/api/v1/admin/activities", fields);
    assert.equal(answer.status, 201, `create ${fields.id}: ${answer.text}`);
    return answer.json;
  }

  buy(activity, user) {
    return this.http("POST", `/api/v1/activities/${activity}/purchase`, { headers: { "X-User-Id": user } });
  }
}

// --- The suite ----------------------------------------------------------------------------------

const service = new Service();
let browser;

async function newPage(t, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, ...options });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  t.after(async () => {
    await context.close();
  });
  page.errors = errors;
  return page;
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(artifacts, `${name}.png`), fullPage: true });
}

// What a person sees of the outcome `status` once the page shows it: the box's rendered text
// (innerText, each line trimmed), checked, with the whole page's, for JavaScript values leaking
// into the page; a screenshot of the page in artifacts/outcomes/<name>.png.
async function seen(page, status, name = status) {
  await page.waitForSelector(`#outcome[data-status="${status}"]`);
  const lines = (text) => text.split("\n").map((line) => line.trim()).filter((line) => line !== "").join("\n");
  const said = lines(await page.innerText("#outcome"));
  const whole = await page.innerText("body");
  for (const [where, text] of [["the outcome", said], ["the page", whole]]) {
    assert.doesNotMatch(text, /null|undefined|NaN|\[object /, `${where} (${name}) shows a JavaScript value:\n${text}`);
  }
  await page.screenshot({ path: path.join(outcomes, `${name}.png`), fullPage: true });
  return said;
}

// Opens the buyer page on an activity as a user (gateway identity, typed into the page).
async function openBuyer(page, activity, user) {
  await page.goto(`${service.base}/?activity=${activity}`);
  await page.fill("#user-name", user);
  await page.waitForSelector("#activity:not([hidden])");
}

before(async () => {
  await service.start();
  browser = await chromium.launch({
    executablePath: args.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
});

after(async () => {
  console.log(`browser-test: screenshots in ${artifacts} (one per outcome in ${outcomes})`);
  if (browser) await browser.close();
  const exit = await service.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, `flashsale did not stop cleanly:\n${service.log()}`);
});

describe("buyer page", () => {
  test("serves the page and its files with their types and cache headers", { timeout: TEST_TIMEOUT_MS }, async () => {
    const page = await service.http("GET", "/");
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type"), /^text\/html/);
    assert.equal(page.headers.get("cache-control"), "no-cache");
    const etag = page.headers.get("etag");
    assert.match(etag, /^"[0-9a-f]{32}"$/);
    const again = await service.http("GET", "/", { headers: { "If-None-Match": etag } });
    assert.equal(again.status, 304);
    assert.equal(again.text, "");
    const js = await service.http("GET", "/web/buyer.js");
    assert.match(js.headers.get("content-type"), /^text\/javascript/);
    const css = await service.http("GET", "/web/style.css");
    assert.match(css.headers.get("content-type"), /^text\/css/);
    assert.equal((await service.http("GET", "/dashboard")).status, 200);
    assert.equal((await service.http("GET", "/web/no-such-file.js")).status, 404);
  });

  test("a double click sends exactly one request; the button stays disabled while it waits", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    // A limit of 5 per user: a second request would buy a second unit, so the orders show it.
    await service.createActivity({ id: "double", title: "Double click", stock: 10, per_user_limit: 5 });
    const page = await newPage(t);
    const target = `${service.base}/api/v1/activities/double/purchase`;
    let sent = 0;
    page.on("request", (request) => {
      if (request.url() === target && request.method() === "POST") sent += 1;
    });
    // Hold the purchase in the browser until the test lets it go, so the wait is observable.
    let release;
    const released = new Promise((resolve) => (release = resolve));
    let arrived;
    const held = new Promise((resolve) => (arrived = resolve));
    await page.route(target, async (route) => {
      arrived();
      await released;
      await route.continue();
    });

    await openBuyer(page, "double", "alice");
    await page.waitForSelector("#action:enabled");
    assert.equal(await page.textContent("#action"), "Buy now");
    await page.dblclick("#action");
    await held;
    // While the request is held: disabled, loading, and a third click does nothing.
    assert.equal(await page.isDisabled("#action"), true);
    assert.equal(await page.getAttribute("#action", "aria-busy"), "true");
    assert.match(await page.getAttribute("#action", "class"), /loading/);
    assert.equal(await page.textContent("#action"), "Buying…");
    await page.evaluate(() => document.getElementById("action").click());
    await shot(page, "buyer-waiting");
    release();

    await page.waitForSelector('#outcome[data-status="reserved"]');
    assert.match(await page.textContent("#order-id"), /^\S+$/);
    await page.waitForSelector("#action:enabled");
    await shot(page, "buyer-reserved");
    assert.equal(sent, 1, "the browser sent the purchase more than once");
    const orders = await service.http("GET", "/api/v1/orders", { headers: { "X-User-Id": "alice" } });
    assert.equal(orders.json.orders.filter((o) => o.activity_id === "double").length, 1, orders.text);
    assert.deepEqual(page.errors, []);
  });

  test("coupon stock: the reservation shows the item the buyer got", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    await service.createActivity({ id: "coupons", title: "Coupons", kind: "items", items: ["SPRING-0042"] });
    const page = await newPage(t);
    await openBuyer(page, "coupons", "saver");
    await page.click("#action");
    const said = await seen(page, "reserved", "reserved-item-no-payment-window");
    assert.equal(await page.textContent("#outcome code.item"), "SPRING-0042");
    const order = await page.textContent("#order-id");
    assert.equal(said, `Reserved! Order ${order}\nYour code(s): SPRING-0042\n0 left.`);
    // That was the last one: the button says so without waiting for a refresh.
    assert.equal(await page.textContent("#action"), "Sold out");
    await shot(page, "buyer-coupon");
  });

  test("a sold-out activity shows sold out, on load and after a press", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    await service.createActivity({ id: "gone", title: "Gone already", stock: 1 });
    assert.equal((await service.buy("gone", "early-bird")).json.code, 1);
    const page = await newPage(t);
    await openBuyer(page, "gone", "late");
    await page.waitForFunction(() => document.getElementById("action").textContent === "Sold out");
    assert.equal(await page.isDisabled("#action"), true);
    assert.equal(await page.textContent("#remaining"), "0");
    await shot(page, "buyer-sold-out");

    // The page saw one unit left; the last unit goes to someone else before the press. The
    // page's refreshes are held so only the press can tell it.
    await service.createActivity({ id: "last", title: "Last unit", stock: 1 });
    await openBuyer(page, "last", "slow");
    await page.waitForSelector("#action:enabled");
    await page.route(`${service.base}/api/v1/activities/last`, () => {}); // never answered
    assert.equal((await service.buy("last", "fast")).json.code, 1);
    await page.click("#action");
    assert.equal(await seen(page, "sold_out"), "Sold out: every unit has been taken.");
    assert.equal(await page.textContent("#action"), "Sold out");
    assert.equal(await page.isDisabled("#action"), true);
    await shot(page, "buyer-sold-out-after-press");
  });

  test("a waiting room: join, a drawn place with the number ahead, an estimate and a progress bar, then buy with the pass", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const start = (await service.serverNow()) + 5000;
    await service.createActivity({
      id: "room", title: "Waiting room", stock: 10, start_ms: start, end_ms: start + 3_600_000,
      waiting_room: { opens_before_ms: 60_000, admit_per_s: 1, pass_ttl_ms: 60_000, max_waiting: 1000 },
    });
    // Five others join first; the page's buyer joins last, and still gets a random place.
    for (let i = 0; i < 5; i += 1) {
      const joined = await service.http("POST", "/api/v1/activities/room/join", { headers: { "X-User-Id": `early${i}` } });
      assert.equal(joined.status, 200, joined.text);
    }
    // Without a pass a purchase is refused before anything is sold.
    const refused = await service.buy("room", "early0");
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.json.status, "pass_required");

    const page = await newPage(t);
    await openBuyer(page, "room", "roomie");
    await page.waitForSelector("#room:not([hidden])");
    await page.click("#room-join");
    await page.waitForSelector('#room[data-status="drawing"]');
    assert.match(await page.innerText("#room-status"), /^You are in the waiting room \(6 in it\)\. Places are drawn at random when the sale starts/);
    assert.equal(await page.isDisabled("#action"), true);
    await shot(page, "buyer-room-drawing");
    // From the start: the place, the number ahead, the estimate and the bar, until the turn comes
    // (one place a second: at most six seconds).
    await page.waitForSelector("#room-facts:not([hidden])");
    assert.match(await page.innerText("#room-place"), /^[1-6] of 6$/);
    assert.match(await page.innerText("#room-ahead"), /^[0-5]$/);
    assert.match(await page.innerText("#room-estimate"), /^(none|00:00:0[0-6])$/);
    assert.equal(await page.isVisible("#room-progress"), true);
    await shot(page, "buyer-room-place");
    assert.match(await seen(page, "admitted"), /^Your turn! Press Buy now\.$/);
    assert.equal(await page.innerText("#room-status"), "It is your turn: buy now.");
    assert.equal(await page.getAttribute("#room-progress", "value"), "100");
    await page.waitForSelector("#action:enabled");
    await page.click("#action");
    await seen(page, "reserved", "reserved-with-room-pass");
    const orders = await service.http("GET", "/api/v1/orders", { headers: { "X-User-Id": "roomie" } });
    assert.equal(orders.json.orders.filter((o) => o.activity_id === "room").length, 1, orders.text);
    assert.deepEqual(page.errors, []);
  });

  test("the countdown follows the server's clock and opens the button at the start", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const start = (await service.serverNow()) + 8000;
    await service.createActivity({ id: "soon", title: "Starts soon", stock: 5, start_ms: start, end_ms: start + 3_600_000 });
    const page = await newPage(t);
    // This device's clock runs an hour fast: a countdown on the device clock would open at once.
    await page.addInitScript(() => {
      const real = Date.now.bind(Date);
      Date.now = () => real() + 3_600_000;
    });
    await openBuyer(page, "soon", "punctual");
    await page.waitForFunction(() => document.getElementById("countdown").dataset.phase === "before");
    assert.equal(await page.isDisabled("#action"), true);
    assert.match(await page.textContent("#action"), /^Opens in 00:00:0\d$/);
    assert.match(await page.textContent("#countdown"), /^Starts in 00:00:0\d$/);
    await shot(page, "buyer-countdown");

    await page.waitForSelector("#action:enabled", { timeout: 20_000 });
    assert.equal(await page.textContent("#action"), "Buy now");
    await page.click("#action");
    // The server agrees the sale has started: the page did not open early.
    await page.waitForSelector('#outcome[data-status="reserved"]');
    await shot(page, "buyer-countdown-opened");
  });

  test("every refusal has its own message: no identity, rate limited", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    await service.createActivity({
      id: "slow", title: "Rate limited", stock: 50, per_user_limit: 10, user_rate: { per_second: 0.05, burst: 1 },
    });
    const page = await newPage(t, { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    await openBuyer(page, "slow", "");
    await page.waitForSelector("#action:enabled");
    await page.click("#action");
    await page.waitForSelector('#outcome[data-status="unauthorized"]');
    assert.match(await page.textContent("#outcome"), /Enter a user name/);

    await page.fill("#user-name", "eager");
    await page.click("#action");
    await page.waitForSelector('#outcome[data-status="reserved"]');
    await page.click("#action");
    assert.match(await seen(page, "rate_limited"), /^Too many attempts: try again in \d+ s\.$/);
    assert.equal(await page.isDisabled("#action"), true);
    assert.match(await page.textContent("#action"), /^Try again in \d+ s$/);
    await shot(page, "buyer-phone-rate-limited");
    // The phone-sized page does not scroll sideways.
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than a phone`);
  });

  test("lottery: a queued draw is polled until its outcome, a direct draw answers at once", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    // A real lottery with an admission queue: serve's own queue consumer draws for the ticket.
    await service.createActivity({
      id: "spring", title: "Spring lottery", kind: "lottery", admission: "queue",
      prizes: [{ id: "tea", name: "Tea set", weight: 1, stock: 3 }],
    });
    const page = await newPage(t);
    let draws = 0;
    let polls = 0;
    page.on("request", (request) => {
      if (request.url().endsWith("/api/v1/activities/spring/draw")) draws += 1;
      if (request.url().includes("/api/v1/activities/spring/tickets/")) polls += 1;
    });
    // The first poll is held for a moment, so the page's waiting state is seen.
    await page.route(/\/api\/v1\/activities\/spring\/tickets\//, async (route) => {
      if (polls <= 1) await new Promise((resolve) => setTimeout(resolve, 1000));
      return route.continue();
    });
    await openBuyer(page, "spring", "lucky");
    await page.waitForSelector("#action:enabled");
    assert.equal(await page.textContent("#action"), "Draw");
    await page.dblclick("#action");
    assert.match(await seen(page, "queued"), /^You are in the queue… \(checked \d+ times?\)$/);
    assert.equal(await page.isDisabled("#action"), true);
    await page.waitForSelector('#outcome[data-status="won"]', { timeout: 20_000 });
    assert.equal(await seen(page, "won"), "You won: Tea set!");
    assert.equal(await page.textContent("#prize-name"), "Tea set");
    assert.equal(draws, 1, "a double click sends one draw");
    assert.ok(polls >= 1);
    await shot(page, "buyer-lottery-won");

    // The demo's lottery draws in the request: won or no prize, then the draw limit.
    const direct = await newPage(t);
    await openBuyer(direct, "demo-lottery", "player");
    await direct.waitForSelector("#action:enabled");
    await direct.click("#action");
    await direct.waitForSelector('#outcome[data-status="won"], #outcome[data-status="no_prize"]');
    await shot(direct, "buyer-lottery-direct");
  });
});

// --- Every outcome a buyer can meet, as the page renders it ---------------------------------------

describe("what a buyer sees", () => {
  test("reserved without items or payment window, then the limit", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    await service.createActivity({ id: "plain", title: "Plain sale", stock: 5, per_user_limit: 1 });
    const page = await newPage(t);
    await openBuyer(page, "plain", "plain-buyer");
    await page.waitForSelector("#action:enabled");
    await page.click("#action");
    const said = await seen(page, "reserved", "reserved-no-items-no-payment-window");
    const order = await page.textContent("#order-id");
    assert.match(order, /^[0-9A-Z]{20,}$/);
    assert.equal(said, `Reserved! Order ${order}\n4 left.`);

    await page.waitForSelector("#action:enabled");
    await page.click("#action");
    assert.equal(await seen(page, "already_purchased", "limit"), "You already have 1 — the limit is 1 per person.");
    assert.deepEqual(page.errors, []);
  });

  test("reserved with a coupon code and a payment window", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    await service.createActivity({
      id: "paid-codes", title: "Codes to pay for", kind: "items", items: ["AUTUMN-0001", "AUTUMN-0002"],
      payment_window_ms: 600_000,
    });
    const page = await newPage(t);
    await openBuyer(page, "paid-codes", "code-buyer");
    await page.waitForSelector("#action:enabled");
    await page.click("#action");
    const said = await seen(page, "reserved", "reserved-item-and-payment-window");
    const order = await page.textContent("#order-id");
    const orders = await service.http("GET", "/api/v1/orders", { headers: { "X-User-Id": "code-buyer" } });
    const mine = orders.json.orders.find((o) => o.order_id === order);
    assert.ok(mine, orders.text);
    const code = await page.textContent("#outcome code.item");
    assert.match(code, /^AUTUMN-000[12]$/);
    // The deadline as this browser formats it (FS.time) from the reply's pay_by_ms, which is
    // the order's creation plus the window.
    const payBy = await page.textContent("#pay-by");
    const match = payBy.match(/^Pay by (.+), or the order expires and the unit goes back on sale\.$/);
    assert.ok(match, payBy);
    assert.equal(said, `Reserved! Order ${order}\nYour code(s): ${code}\n1 left.\n${payBy}`);
    assert.deepEqual(page.errors, []);
  });

  test("not started and ended, as the server says when this device's clock is wrong", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    // The page opens the button from its estimate of the server's clock; a device clock that
    // jumps after the estimate makes it press too early or too late, and the server answers.
    // The activity's refreshes are held once the page has its estimate, so it keeps the wrong one.
    const jump = async (page, activity, shiftMs) => {
      await page.route(`${service.base}/api/v1/activities/${activity}`, () => {});
      await page.evaluate((shift) => {
        const real = Date.now.bind(Date);
        Date.now = () => real() + shift;
      }, shiftMs);
    };

    // Opens in an hour; the device jumps 90 minutes ahead.
    const now = await service.serverNow();
    await service.createActivity({ id: "later", title: "Later", stock: 5, start_ms: now + 3_600_000, end_ms: now + 7_200_000 });
    const early = await newPage(t);
    await openBuyer(early, "later", "clock-early");
    await early.waitForFunction(() => document.getElementById("countdown").dataset.phase === "before");
    assert.equal(await early.isDisabled("#action"), true);
    await jump(early, "later", 5_400_000);
    await early.waitForSelector("#action:enabled");
    await early.click("#action");
    const opens = await early.evaluate((ms) => FS.time(ms), now + 3_600_000);
    assert.equal(await seen(early, "not_started"), `Not started yet: the sale opens at ${opens}.`);
    assert.deepEqual(early.errors, []);

    // Ends in 3 s; the device jumps an hour back, and presses once the server's clock is past the end.
    const end = (await service.serverNow()) + 3000;
    await service.createActivity({ id: "closing", title: "Closing", stock: 5, start_ms: 0, end_ms: end });
    const late = await newPage(t);
    await openBuyer(late, "closing", "clock-late");
    await late.waitForFunction(() => document.getElementById("countdown").dataset.phase === "on");
    await jump(late, "closing", -3_600_000);
    for (let i = 0; i < 100 && (await service.serverNow()) <= end; i++) await sleep(100);
    assert.ok((await service.serverNow()) > end, "the server's clock never passed the end");
    await late.waitForSelector("#action:enabled");
    await late.click("#action");
    assert.equal(await seen(late, "ended"), "This sale has ended.");
    assert.deepEqual(late.errors, []);
  });

  test("a lottery draw that wins nothing", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    // One chance in a billion of the prize.
    await service.createActivity({
      id: "long-odds", title: "Long odds", kind: "lottery", no_prize_weight: 1_000_000_000,
      prizes: [{ id: "car", name: "A car", weight: 1, stock: 1 }],
    });
    const page = await newPage(t);
    await openBuyer(page, "long-odds", "hopeful");
    await page.waitForSelector("#action:enabled");
    await page.click("#action");
    assert.equal(await seen(page, "no_prize"), "No prize this time. Thanks for playing!");
    assert.deepEqual(page.errors, []);
  });
});

// A purchase while Redis does not answer: a service of its own whose redis-server is stopped
// (SIGSTOP, by PID) while the page presses, then continued. The page's purchase carries an
// Idempotency-Key, whose claim is its first Redis command (src/service/replay.h): that is what goes
// unanswered, before any script is sent, so the service says it is unavailable and nothing was
// done (not an unknown outcome), and the retry with the same key buys once.
describe("buyer page when Redis stalls", () => {
  const stalled = new Service(["--demo", "--redis-timeout-ms", "1000"], "flashsale-stalled");
  before(async () => {
    await stalled.start();
  });
  after(async () => {
    for (const pid of redisServersFor(stalled.dataDir)) process.kill(pid, "SIGCONT");
    const exit = await stalled.stop();
    assert.deepEqual(exit, { code: 0, signal: null }, `flashsale did not stop cleanly:\n${stalled.log()}`);
  });

  test("no answer says so, and pressing again finds the one order", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const page = await newPage(t);
    await page.goto(`${stalled.base}/?activity=demo`);
    await page.fill("#user-name", "patient");
    await page.waitForSelector("#action:enabled");
    const redis = redisServersFor(stalled.dataDir);
    assert.equal(redis.length, 1, "the demo's redis-server");
    process.kill(redis[0], "SIGSTOP");
    let said;
    try {
      await page.click("#action");
      said = await seen(page, "unavailable");
    } finally {
      process.kill(redis[0], "SIGCONT");
    }
    assert.match(said, /^The service is unavailable for a moment \(unavailable\)\. Try again in \d+ s — a retry carries the same key, so it cannot buy twice\.$/);

    await page.waitForSelector("#action:enabled");
    await page.click("#action");
    const again = await seen(page, "reserved", "reserved-after-no-answer");
    const order = await page.textContent("#order-id");
    assert.match(again, new RegExp(`^Reserved! Order ${order}\n\\d+ left\\.$`));
    const orders = await stalled.http("GET", "/api/v1/orders", { headers: { "X-User-Id": "patient" } });
    assert.deepEqual(orders.json.orders.filter((o) => o.activity_id === "demo").map((o) => o.order_id), [order], orders.text);
    assert.deepEqual(page.errors, []);
  });

  // A purchase without a key sends its script at once, so a stall leaves its outcome unknown. The
  // page always sends a key; what it shows for that answer is checked on the service's own reply,
  // taken while Redis was stopped and handed to the page's next purchase as it came.
  test("an unknown outcome says so", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const redis = redisServersFor(stalled.dataDir);
    process.kill(redis[0], "SIGSTOP");
    let reply;
    try {
      reply = await stalled.buy("demo", "keyless");
    } finally {
      process.kill(redis[0], "SIGCONT");
    }
    assert.equal(reply.status, 503, reply.text);
    assert.equal(reply.json.status, "unknown_outcome", reply.text);

    const page = await newPage(t);
    await page.route("**/api/v1/activities/demo/purchase", (route) =>
      route.fulfill({ status: reply.status, headers: Object.fromEntries(reply.headers), body: reply.text }),
    );
    await page.goto(`${stalled.base}/?activity=demo`);
    await page.fill("#user-name", "keyless");
    await page.waitForSelector("#action:enabled");
    await page.click("#action");
    const said = await seen(page, "unknown_outcome");
    assert.match(said, /^No answer in time: the purchase may have gone through\. Press again in \d+ s to find out — the retry carries the same key, so it cannot buy twice\.$/);
    assert.deepEqual(page.errors, []);
  });
});

describe("dashboard", () => {
  async function openDashboard(t) {
    const page = await newPage(t, { viewport: { width: 1400, height: 1000 } });
    await page.goto(`${service.base}/dashboard`);
    await page.fill("#admin-token", service.adminToken);
    await page.click("#connect");
    await page.waitForSelector('tr[data-activity="demo"]');
    return page;
  }
  const cell = (page, activity, field) => page.textContent(`tr[data-activity="${activity}"] [data-field="${field}"]`);

  test("reserved is what is reserved now; lotteries have no restock", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    await service.createActivity({ id: "unpaid", title: "Unpaid", stock: 2, per_user_limit: 1, payment_window_ms: 300 });
    assert.equal((await service.buy("unpaid", "payer-1")).json.code, 1);
    assert.equal((await service.buy("unpaid", "payer-2")).json.code, 1);
    // Both orders expire unpaid once recorded: the expire job, run until both units came back.
    let released = 0;
    for (let i = 0; i < 100 && released < 2; i++) {
      await sleep(200);
      await service.admin("POST", "/api/v1/admin/jobs/expire", { activity_id: "unpaid" });
      const status = await service.admin("GET", "/api/v1/admin/activities/unpaid");
      released = status.json.redis.released;
    }
    assert.equal(released, 2);
    const page = await openDashboard(t);
    await page.waitForSelector('tr[data-activity="unpaid"]');
    await page.waitForFunction(() => document.querySelector('tr[data-activity="unpaid"] [data-field="remaining"]').textContent === "2");
    assert.equal(await cell(page, "unpaid", "reserved"), "0");
    assert.equal(await cell(page, "unpaid", "total"), "2");
    // The demo lottery: open/close, but no restock.
    await page.waitForSelector('tr[data-activity="demo-lottery"] [data-action="toggle"]');
    assert.equal(await page.$$eval('tr[data-activity="demo-lottery"] [data-action="restock"]', (b) => b.length), 0);
    assert.equal(await page.$$eval('tr[data-activity="demo"] [data-action="restock"]', (b) => b.length), 1);
  });

  test("the create form makes lotteries, payment windows and rate limits", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const page = await openDashboard(t);
    await page.fill("#new-id", "form-lottery");
    await page.selectOption("#new-kind", "lottery");
    assert.equal(await page.isVisible("#new-prizes"), true);
    assert.equal(await page.isVisible("#new-stock"), false);
    await page.fill("#new-prizes", "phone:1:1, mug:20:5");
    await page.fill("#new-no-prize", "79");
    await page.selectOption("#new-admission", "queue");
    await page.click("#create");
    await page.waitForSelector('tr[data-activity="form-lottery"]');
    const lottery = await service.admin("GET", "/api/v1/admin/activities/form-lottery");
    assert.equal(lottery.json.activity.kind, "lottery", lottery.text);
    assert.equal(lottery.json.activity.admission, "queue", lottery.text);
    assert.equal(lottery.json.activity.no_prize_weight, 79, lottery.text);
    assert.equal(lottery.json.activity.total_units, 6, lottery.text);

    await page.fill("#new-id", "form-paid");
    await page.selectOption("#new-kind", "counted");
    await page.fill("#new-stock", "3");
    await page.fill("#new-pay", "90");
    await page.fill("#new-rate", "2");
    await page.fill("#new-burst", "4");
    await page.click("#create");
    await page.waitForSelector('tr[data-activity="form-paid"]');
    const paid = await service.admin("GET", "/api/v1/admin/activities/form-paid");
    assert.equal(paid.json.activity.payment_window_ms, 90000, paid.text);
    assert.deepEqual(paid.json.activity.user_rate, { per_second: 2, burst: 4 }, paid.text);
    await shot(page, "dashboard-create-form");
  });

  test("a wrong admin token is refused and said so", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const page = await newPage(t);
    await page.goto(`${service.base}/dashboard`);
    await page.fill("#admin-token", "not-the-token");
    await page.click("#connect");
    await page.waitForFunction(() => /refused/.test(document.getElementById("status").textContent));
    assert.equal(await page.$$eval("#activities tbody tr", (rows) => rows.length), 0);
  });

  test("the figures and the chart move while a load runs", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    await service.createActivity({ id: "rush", title: "Rush", stock: 100000, per_user_limit: 1 });
    const page = await openDashboard(t);
    await page.waitForSelector('tr[data-activity="rush"]');
    assert.equal(await cell(page, "rush", "reserved"), "0");
    // The demo sale was reconciled when the service started: the invariant holds.
    await page.waitForFunction(
      () => document.querySelector('tr[data-activity="demo"] [data-field="reconciliation"]')?.textContent === "ok (drift 0)",
      null, { timeout: 20_000 });
    // Until the scheduled reconciliation has looked at it (once a minute), there is no report.
    assert.match(await cell(page, "rush", "reconciliation"), /^(not available|ok \(drift 0\))$/);
    const remainingBefore = await cell(page, "rush", "remaining");

    // Plain HTTP purchases from here, distinct users, a few at a time, until the dashboard has
    // shown them (bounded in count and time).
    let stop = false;
    let bought = 0;
    const worker = async (w) => {
      for (let i = 0; !stop && i < 2000; i++) {
        const answer = await service.buy("rush", `load-${w}-${i}`);
        if (answer.json && answer.json.code === 1) bought += 1;
      }
    };
    const load = Promise.all([0, 1, 2, 3].map(worker));
    try {
      await page.waitForFunction(() => {
        const reserved = Number(document.querySelector('tr[data-activity="rush"] [data-field="reserved"]').textContent);
        const rate = Number(document.getElementById("rate-total").textContent);
        const samples = Number(document.getElementById("chart").dataset.samples);
        return reserved > 0 && rate > 0 && samples >= 3 && document.querySelector('#legend [data-status="reserved"]');
      }, null, { timeout: 30_000 }).catch(async (error) => {
        // What the page showed instead, for whoever reads the failure.
        const row = await page.textContent('tr[data-activity="rush"]');
        const rate = await page.textContent("#rate-total");
        const samples = await page.getAttribute("#chart", "data-samples");
        throw new Error(`${error.message}\nbought ${bought}; row: ${row}; rate ${rate}; samples ${samples}; legend: ${await page.textContent("#legend")}`);
      });
      await shot(page, "dashboard-under-load");
    } finally {
      stop = true;
      await load;
    }
    assert.ok(bought > 0);
    assert.notEqual(await cell(page, "rush", "remaining"), remainingBefore);
    // After the load, the figures settle on the truth: every unit bought is reserved, and the
    // order pipeline, which yields to a burst (its inserts run at a low priority), has persisted
    // them.
    await page.waitForFunction((n) => document.querySelector('tr[data-activity="rush"] [data-field="reserved"]').textContent === String(n), bought);
    await page.waitForFunction((n) => document.querySelector('tr[data-activity="rush"] [data-field="persisted"]').textContent === String(n), bought, { timeout: 60_000 });
    assert.equal(await cell(page, "rush", "remaining"), String(100000 - bought));
  });

  test("create, close, open and restock from the dashboard", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const page = await openDashboard(t);
    await page.fill("#new-id", "made-here");
    await page.fill("#new-title", "Made on the dashboard");
    await page.fill("#new-stock", "7");
    await page.click("#create");
    await page.waitForSelector('tr[data-activity="made-here"]');
    await page.waitForFunction(() => document.querySelector('tr[data-activity="made-here"] [data-field="total"]').textContent === "7");

    await page.click('tr[data-activity="made-here"] [data-action="toggle"]'); // close
    await page.waitForFunction(() => document.querySelector('tr[data-activity="made-here"] [data-field="state"]').textContent === "closed");
    assert.equal((await service.buy("made-here", "shut-out")).json.code, -5);

    await page.click('tr[data-activity="made-here"] [data-action="toggle"]'); // open again
    await page.waitForFunction(() => document.querySelector('tr[data-activity="made-here"] [data-field="state"]').textContent === "open");
    await page.fill('tr[data-activity="made-here"] input', "5");
    await page.click('tr[data-activity="made-here"] [data-action="restock"]');
    await page.waitForFunction(() => document.querySelector('tr[data-activity="made-here"] [data-field="total"]').textContent === "12");
    const status = await service.admin("GET", "/api/v1/admin/activities/made-here");
    assert.equal(status.json.redis.total, 12);
    assert.equal(status.json.activity.open, true);
    assert.equal((await service.buy("made-here", "welcome")).json.code, 1);
    await shot(page, "dashboard-actions");
  });
});

// --- Token identity (serve's default): the page asks for a token and says what a 401 is ---------

describe("report", () => {
  // Issue 35, point 4: the page draws the record's orders per second; its points are checked
  // against the JSON route, which reads the record.
  test("the chart's points are the record's orders per second, with the totals", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    await service.createActivity({ id: "report-sale", title: "Report", stock: 6, per_user_limit: 1 });
    let bought = 0;
    for (let i = 0; i < 6; i++) {
      const answer = await service.buy("report-sale", `report-${i}`);
      assert.equal(answer.json && answer.json.code, 1, answer.text);
      bought += 1;
      if (i % 2 === 1) await sleep(1100); // orders in more than one second
    }
    // Two buyers more, told sold_out: the top refusal reason.
    for (const user of ["report-late-1", "report-late-2"]) {
      const answer = await service.buy("report-sale", user);
      assert.equal(answer.json && answer.json.status, "sold_out", answer.text);
    }
    // Until the order pipeline has persisted every order and the answers are written (every 2 s;
    // bounded).
    let report = null;
    const soldOut = (r) => (r.answers.find((a) => a.status === "sold_out") || { count: 0 }).count;
    for (let i = 0; i < 200; i++) {
      const answer = await service.admin("GET", "/api/v1/admin/activities/report-sale/report");
      assert.equal(answer.status, 200, answer.text);
      report = answer.json;
      if (report.orders === bought && soldOut(report) === 2) break;
      await sleep(100);
    }
    assert.equal(report.orders, bought, JSON.stringify(report));
    assert.equal(soldOut(report), 2, JSON.stringify(report.answers));
    assert.equal(report.units_sold, 6);
    assert.equal(typeof report.sell_out_ms, "number", "sold out: a time to sell out");
    assert.ok(report.buckets.length >= 2, JSON.stringify(report.buckets));

    const page = await newPage(t);
    await page.goto(`${service.base}/report?activity=report-sale`);
    await page.fill("#admin-token", service.adminToken);
    await page.click("#connect");
    await page.waitForSelector('body[data-loaded="true"]');
    const points = await page.$$eval("#chart circle.point", (circles) =>
      circles.map((c) => ({ second: Number(c.dataset.second), orders: Number(c.dataset.orders) })));
    assert.deepEqual(points, report.buckets.map((b) => ({ second: b.second, orders: b.orders })));
    assert.equal(points.reduce((sum, p) => sum + p.orders, 0), bought);
    const totals = await page.innerText("#totals");
    assert.match(totals, /units sold \/ stock\s+6 \/ 6/);
    const refusals = await page.$$eval("#refusals tbody tr", (rows) =>
      rows.map((r) => Array.from(r.cells, (c) => c.textContent)));
    assert.deepEqual(refusals[0].slice(0, 2), ["sold_out", "2"], JSON.stringify(refusals));
    assert.doesNotMatch(await page.innerText("body"), /null|undefined|NaN|\[object /);
    assert.deepEqual(page.errors, []);
    await shot(page, "report");
  });

  test("a wrong admin token is said so", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const page = await newPage(t);
    await page.goto(`${service.base}/report?activity=demo`);
    await page.fill("#admin-token", "not-the-token");
    await page.click("#connect");
    await page.waitForFunction(() => /refused/.test(document.getElementById("status").textContent));
    assert.equal(await page.$$eval("#chart circle.point", (c) => c.length), 0);
  });
});

describe("buyer page in token mode", () => {
  const tokenService = new Service([], "flashsale-token");
  before(async () => {
    await tokenService.start();
  });
  after(async () => {
    const exit = await tokenService.stop();
    assert.deepEqual(exit, { code: 0, signal: null }, `flashsale did not stop cleanly:\n${tokenService.log()}`);
  });

  test("asks for a token, shows a 401 as such, and buys with a token", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const created = await tokenService.admin("POST", "/api/v1/admin/activities", { id: "signed", title: "Signed in", stock: 3 });
    assert.equal(created.status, 201, created.text);
    const page = await newPage(t);
    await page.goto(`${tokenService.base}/?activity=signed`);
    await page.waitForSelector("#activity:not([hidden])");
    // The service said "token": the token box, and no choice of a user name.
    await page.waitForSelector("#token-box:not([hidden])");
    assert.equal(await page.isVisible("#user-name"), false);
    assert.equal(await page.isVisible("#mode-user"), false);
    await page.waitForSelector("#action:enabled");
    await page.click("#action");
    await page.waitForSelector('#outcome[data-status="unauthorized"]');
    const said = await page.textContent("#outcome");
    assert.match(said, /401 Unauthorized/);
    assert.match(said, /token/);
    assert.doesNotMatch(said, /user name/);
    await shot(page, "buyer-token-401");

    const issued = await tokenService.admin("POST", "/api/v1/admin/tokens", { user_id: "tina", ttl_s: 600 });
    assert.equal(issued.status, 200, issued.text);
    await page.fill("#token", issued.json.token);
    await page.click("#action");
    await page.waitForSelector('#outcome[data-status="reserved"]');
    const orders = await tokenService.http("GET", "/api/v1/orders", { headers: { Authorization: `Bearer ${issued.json.token}` } });
    assert.equal(orders.json.orders.filter((o) => o.activity_id === "signed").length, 1, orders.text);
    assert.deepEqual(page.errors, []);
  });
});

// --- A shop front on another origin (CORS) ------------------------------------------------------

// The shop's page comes from a second loopback origin (another port) and calls the API of a
// serve started with --cors-origin naming that origin; a third origin is not named.
describe("a shop front on another origin", () => {
  const corsService = new Service([], "flashsale-cors");
  const pages = [];
  let shopOrigin;
  let strangerOrigin;

  async function servePage(name) {
    const port = await freePort();
    const server = createHttpServer((request, response) => {
      response.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
      response.end(`<!doctype html><html><head><title>${name}</title></head><body><h1>${name}</h1></body></html>`);
    });
    await new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", resolve);
    });
    pages.push(server);
    return `http://127.0.0.1:${port}`;
  }

  before(async () => {
    shopOrigin = await servePage("Shop");
    strangerOrigin = await servePage("Stranger");
    corsService.flags = ["--demo", "--cors-origin", shopOrigin];
    await corsService.start();
  });
  after(async () => {
    for (const server of pages) await new Promise((resolve) => server.close(resolve));
    const exit = await corsService.stop();
    assert.deepEqual(exit, { code: 0, signal: null }, `flashsale did not stop cleanly:\n${corsService.log()}`);
  });

  // fetch() from the page: the answer, or "refused" when the browser did not let the page see it.
  async function fetchFrom(page, url, init) {
    return page.evaluate(async ({ url, init }) => {
      try {
        const response = await fetch(url, init);
        return { status: response.status, body: await response.json(), location: response.headers.get("location") };
      } catch (error) {
        return "refused";
      }
    }, { url, init });
  }

  test("the shop's page buys and reads across origins; the admin API and other origins are refused", { timeout: TEST_TIMEOUT_MS }, async (t) => {
    const api = corsService.base;
    const page = await newPage(t);
    await page.goto(`${shopOrigin}/`);
    // X-User-Id, a JSON body and an Idempotency-Key: a request the browser preflights.
    const bought = await fetchFrom(page, `${api}/api/v1/activities/demo/purchase`, {
      method: "POST",
      headers: { "X-User-Id": "shopper", "Content-Type": "application/json", "Idempotency-Key": "shop-1" },
      body: JSON.stringify({ quantity: 1 }),
    });
    assert.notEqual(bought, "refused", "the shop's purchase was refused by the browser");
    assert.equal(bought.status, 200, JSON.stringify(bought));
    assert.equal(bought.body.status, "reserved", JSON.stringify(bought));
    const listed = await fetchFrom(page, `${api}/api/v1/activities`, {});
    assert.equal(listed.status, 200, JSON.stringify(listed));
    assert.ok(listed.body.activities.some((a) => a.id === "demo"), JSON.stringify(listed));
    const orders = await fetchFrom(page, `${api}/api/v1/orders`, { headers: { "X-User-Id": "shopper" } });
    assert.equal(orders.status, 200, JSON.stringify(orders));
    assert.equal(orders.body.orders.length, 1, JSON.stringify(orders));
    await shot(page, "cors-shop-front");

    // The admin API answers no page of another origin, even with the token.
    const admin = await fetchFrom(page, `${api}/api/v1/admin/activities`, {
      headers: { Authorization: `Bearer ${corsService.adminToken}` },
    });
    assert.equal(admin, "refused");

    // An origin not named: its preflight is not answered for it, so the purchase is never sent.
    const strangerPage = await newPage(t);
    await strangerPage.goto(`${strangerOrigin}/`);
    const stranger = await fetchFrom(strangerPage, `${api}/api/v1/activities/demo/purchase`, {
      method: "POST",
      headers: { "X-User-Id": "stranger" },
    });
    assert.equal(stranger, "refused");
    const none = await corsService.http("GET", "/api/v1/orders", { headers: { "X-User-Id": "stranger" } });
    assert.equal(none.json.orders.length, 0, none.text);
    assert.deepEqual(page.errors, []);
  });
});
