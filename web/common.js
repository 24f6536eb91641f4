// Shared by the buyer page and the dashboard: one request helper that never throws, and
// formatting. Plain browser JavaScript, no build step.
"use strict";

const FS = (() => {
  // Sends one request and resolves to what came back; a network failure or a timeout is an
  // answer too ({status: 0, error}), never an exception. sentAt/receivedAt (client clock) let the
  // caller estimate the server clock offset from the round trip.
  async function request(method, url, { headers = {}, body, timeoutMs = 15000 } = {}) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    const sentAt = Date.now();
    try {
      const response = await fetch(url, {
        method,
        headers,
        body,
        signal: controller.signal,
        cache: "no-store",
      });
      const text = await response.text();
      let json = null;
      try {
        json = text ? JSON.parse(text) : null;
      } catch (_) {
        json = null;
      }
      return {
        status: response.status,
        json,
        text,
        headers: response.headers,
        sentAt,
        receivedAt: Date.now(),
      };
    } catch (e) {
      const error = e && e.name === "AbortError" ? "no answer in time" : "network error";
      return { status: 0, json: null, text: "", headers: new Headers(), sentAt, receivedAt: Date.now(), error };
    } finally {
      clearTimeout(timer);
    }
  }

  // Retry-After in whole seconds (at least 1), from the header or a JSON retry_after_ms.
  function retryAfterSeconds(answer) {
    const header = Number(answer.headers.get("Retry-After"));
    if (Number.isFinite(header) && header > 0) return Math.ceil(header);
    const ms = answer.json && Number(answer.json.retry_after_ms);
    if (Number.isFinite(ms) && ms > 0) return Math.ceil(ms / 1000);
    return 1;
  }

  // 93784000 -> "1d 02:03:04"; 5000 -> "00:00:05".
  function duration(ms) {
    const total = Math.max(0, Math.ceil(ms / 1000));
    const days = Math.floor(total / 86400);
    const pad = (n) => String(n).padStart(2, "0");
    const clock = `${pad(Math.floor((total % 86400) / 3600))}:${pad(Math.floor((total % 3600) / 60))}:${pad(total % 60)}`;
    return days > 0 ? `${days}d ${clock}` : clock;
  }

  function time(ms) {
    return new Date(ms).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
  }

  // el("p", {class: "x"}, "text", child) -> a new element.
  function el(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value === false || value === null || value === undefined) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  return { request, retryAfterSeconds, duration, time, el };
})();
