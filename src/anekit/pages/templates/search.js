"use strict";
// The search page: the token in this tab's session storage (never in a URL), every
// server string put into the page as text (never as HTML).
(function () {
  const KEY = "anekit-token";
  const CONTEXT = 12; // lines shown around a hit
  const SNIPPET_CHARS = 4000; // of a result's snippet
  const $ = (id) => document.getElementById(id);
  let pending = null;
  let timer = 0;
  let statusTimer = 0;

  function token() { return window.sessionStorage.getItem(KEY) || ""; }

  function showLogin(message) {
    $("app").classList.add("hidden");
    $("login").classList.remove("hidden");
    $("login-error").textContent = message || "";
    $("token").focus();
  }

  function showApp() {
    $("login").classList.add("hidden");
    $("app").classList.remove("hidden");
    $("q").focus();
  }

  async function api(name, params, signal) {
    const query = new URLSearchParams(params);
    const response = await fetch("/api/" + name + "?" + query.toString(), {
      headers: { Authorization: "Bearer " + token() },
      signal: signal,
      cache: "no-store",
      credentials: "omit",
    });
    if (response.status === 401) {
      window.sessionStorage.removeItem(KEY);
      showLogin("The server refused this token.");
      throw new Error("unauthorized");
    }
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || ("HTTP " + response.status));
    return body;
  }

  function element(tag, className, text) {
    const made = document.createElement(tag);
    if (className) made.className = className;
    if (text !== undefined) made.textContent = text;
    return made;
  }

  // words of the query worth marking: three letters or more, not the glue of a question
  const GLUE = new Set(["the", "and", "for", "are", "was", "how", "what", "where", "when",
    "which", "who", "why", "does", "with", "from", "into", "that", "this"]);
  function terms(query) {
    return query.split(/[^A-Za-z0-9_]+/)
      .filter((word) => word.length > 2 && !GLUE.has(word.toLowerCase()));
  }

  // text with the query's words marked, built from text nodes and <mark> elements
  function highlighted(text, words) {
    const fragment = document.createDocumentFragment();
    if (!words.length) { fragment.append(text); return fragment; }
    const escaped = words.map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    const pattern = new RegExp("(" + escaped.join("|") + ")", "gi");
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      fragment.append(text.slice(last, match.index));
      fragment.append(element("mark", "", match[0]));
      last = match.index + match[0].length;
    }
    fragment.append(text.slice(last));
    return fragment;
  }

  function paths() {
    return $("paths").value.split(/[\s,]+/).filter(Boolean);
  }

  async function search() {
    const query = $("q").value.trim();
    $("error").textContent = "";
    if (pending) pending.abort();
    if (!query) {
      $("results").replaceChildren(element("p", "empty", "Type a query."));
      $("summary").textContent = "";
      return;
    }
    pending = new AbortController();
    const params = [["q", query], ["mode", $("mode").value], ["k", "20"]];
    for (const path of paths()) params.push(["path", path]);
    try {
      const answer = await api("search", params, pending.signal);
      render(answer, query);
    } catch (error) {
      if (error.name !== "AbortError" && error.message !== "unauthorized") {
        $("error").textContent = error.message;
      }
    }
  }

  function render(answer, query) {
    const words = terms(query);
    const list = document.createDocumentFragment();
    const multiple = (answer.roots || []).length > 1;
    for (const hit of answer.hits) {
      const item = element("div", "hit");
      item.dataset.path = hit.path;
      item.dataset.root = hit.root || (answer.roots || [answer.root])[0] || "";
      item.dataset.start = hit.start_line;
      item.dataset.end = hit.end_line;
      const where = element("div", "where");
      if (multiple && hit.root) where.append(element("span", "muted", hit.root.split("/").pop() + ": "));
      where.append(element("span", "path", hit.path));
      where.append(element("span", "muted", ":" + hit.start_line + "-" + hit.end_line + "  "));
      if (hit.symbol) where.append(element("code", "", hit.symbol));
      where.append(element("span", "muted", "  " + hit.kind + "  " + hit.score.toFixed(3)));
      item.append(where);
      const snippet = element("pre", "snippet");
      snippet.append(highlighted(String(hit.snippet || "").slice(0, SNIPPET_CHARS), words));
      item.append(snippet);
      item.addEventListener("click", () => open(item));
      list.append(item);
    }
    if (!answer.hits.length) list.append(element("p", "empty", "No results."));
    $("results").replaceChildren(list);
    const skipped = (answer.skipped || []).map((s) => s.root + " (" + s.reason + ")");
    $("summary").textContent = answer.hits.length + " results in " + answer.milliseconds +
      " ms" + (skipped.length ? "; not searched: " + skipped.join(", ") : "");
  }

  async function open(item) {
    document.querySelectorAll(".hit.chosen").forEach((hit) => hit.classList.remove("chosen"));
    item.classList.add("chosen");
    const start = Number(item.dataset.start);
    const end = Number(item.dataset.end);
    const params = [["path", item.dataset.path], ["start", String(Math.max(1, start - CONTEXT))],
      ["end", String(end + CONTEXT)]];
    if (item.dataset.root) params.push(["root", item.dataset.root]);
    try {
      const file = await api("read", params);
      $("viewer-title").textContent = file.path + " (lines " + file.start_line + "-" +
        file.end_line + " of " + file.total_lines + ")";
      const pre = element("pre", "snippet");
      file.text.split("\n").forEach((line, offset) => {
        const number = file.start_line + offset;
        const row = element("span", "line" + (number >= start && number <= end ? " in-hit" : ""));
        row.append(element("span", "number", String(number)));
        row.append(line);
        pre.append(row);
      });
      $("viewer").replaceChildren(pre);
    } catch (error) {
      if (error.message !== "unauthorized") {
        $("viewer").replaceChildren(element("p", "error", error.message));
      }
    }
  }

  async function status() {
    window.clearTimeout(statusTimer);
    try {
      const answer = await api("status", []);
      const parts = document.createDocumentFragment();
      let running = false;
      for (const root of answer.roots) {
        const line = element("p", "status-root");
        line.append(element("strong", "", root.root));
        const state = root.indexing || { state: "idle" };
        let text = "";
        if (root.missing) text = ": " + root.missing;
        else if (root.damaged) text = ": damaged: " + root.damaged;
        else text = ": " + (root.files ?? 0) + " files, " + (root.chunks ?? 0) + " chunks" +
          (root.identity && root.identity.model ? ", model " + root.identity.model : "");
        if (state.state === "running") {
          running = true;
          text += "; indexing: " + (state.files_done ?? 0) + " of " + (state.files_total ?? "?") +
            " files, " + (state.chunks_done ?? 0) + " of " + (state.chunks_total ?? "?") + " chunks";
        } else if (state.state === "failed") {
          text += "; last index run failed: " + state.error;
        }
        line.append(text);
        parts.append(line);
      }
      const lanes = (answer.lanes || []).join(", ") || "this machine's default";
      parts.append(element("p", "status-root muted", "embedding lanes: " + lanes));
      $("status").replaceChildren(parts);
      statusTimer = window.setTimeout(status, running ? 2000 : 15000);
    } catch (error) {
      if (error.message !== "unauthorized") $("status").textContent = error.message;
    }
  }

  async function start() {
    try {
      await status();
      if (!token()) return;
      showApp();
      if ($("q").value.trim()) search();
    } catch (error) {
      if (error.message !== "unauthorized") showLogin(error.message);
    }
  }

  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const given = $("token").value.trim();
    if (!given) { $("login-error").textContent = "Paste the token."; return; }
    window.sessionStorage.setItem(KEY, given);
    $("token").value = "";
    start();
  });
  $("logout").addEventListener("click", () => {
    window.sessionStorage.removeItem(KEY);
    showLogin("");
  });
  $("q").addEventListener("input", () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(search, 250);
  });
  $("mode").addEventListener("change", search);
  $("paths").addEventListener("input", () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(search, 250);
  });

  if (token()) start(); else showLogin("");
  document.body.dataset.ready = "1";
})();
