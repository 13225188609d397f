// The chat page's behaviour (chat.html loads it): the sandbox's control API over fetch, its live
// events over an EventSource, and the view kept in step with both.
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const COMMANDS = ["/start", "/help", "/play", "/board", "/me"];
const COLORS = ["#e17076", "#7bc862", "#65aadd", "#a695e7", "#ee7aae", "#6ec9cb", "#faa774"];
// follow: the conversation is scrolled to its newest message and stays there as messages come;
// reading further up turns it off until the reader scrolls back down, sends, or taps "new".
const view = { users: [], chats: [], bot: null, user: null, chat: null, unread: {}, follow: true };
const $ = (id) => document.getElementById(id);
const NEAR_END_PX = 80;

async function api(path, body) {
  const init = { method: body === undefined ? "GET" : "POST", headers: { "X-Sandbox-Token": token } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 403) staleToken();
  const answer = await response.json().catch(() => ({ ok: false, error: response.statusText }));
  if (!answer.ok) throw new Error(answer.error || "HTTP " + response.status);
  return answer.result;
}

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const child of children) if (child != null) node.append(child);
  return node;
}

// The sandbox no longer takes this page's token (it was started afresh): reloading shows the
// sandbox's own page about it, which says what happened and where the current link is.
function staleToken() {
  if (!staleToken.done) { staleToken.done = true; location.reload(); }
}

function nearEnd() {
  const box = $("messages");
  return box.scrollHeight - box.scrollTop - box.clientHeight < NEAR_END_PX;
}

function toEnd() {
  const box = $("messages");
  view.follow = true;
  box.scrollTop = box.scrollHeight;
  $("jump").hidden = true;
}

function showError(message) { $("error").textContent = message || ""; }

function toast(text) {
  const box = $("toast");
  box.textContent = text;
  box.classList.add("on");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove("on"), 2500);
}

function avatar(name, id) {
  return el("span", { className: "avatar", textContent: (name || "?")[0].toUpperCase(),
                      style: "background:" + COLORS[Math.abs(id) % COLORS.length] });
}

function chatsOf(userId) {
  return view.chats.filter((c) => c.id === userId || (c.type === "group" && c.members.includes(userId)));
}

function chatName(chat) { return chat.type === "private" ? "Codemojex bot" : chat.title; }

function renderUsers() {
  $("users").replaceChildren(...view.users.map((u) => {
    const button = el("button", { className: "pick" + (u.id === view.user ? " on" : ""), type: "button" },
      avatar(u.first_name, u.id), el("span", { className: "name", textContent: u.first_name }),
      u.is_blocked ? el("span", { className: "blocked", textContent: "blocked the bot" }) : null);
    button.dataset.user = u.id;
    button.onclick = () => pickUser(u.id);
    return button;
  }));
}

function renderChats() {
  $("chats").replaceChildren(...chatsOf(view.user).map((c) => {
    const unread = view.unread[c.id] || 0;
    const button = el("button", { className: "pick" + (c.id === view.chat ? " on" : ""), type: "button" },
      el("span", { className: "avatar", textContent: c.type === "private" ? "🤖" : "👥",
                   style: "background:#dfe9f5" }),
      el("span", { className: "name", textContent: chatName(c) }),
      unread ? el("span", { className: "badge", textContent: String(unread) }) : null);
    button.dataset.chat = c.id;
    button.onclick = () => pickChat(c.id);
    return button;
  }));
}

function renderHeader() {
  const chat = view.chats.find((c) => c.id === view.chat);
  const user = view.users.find((u) => u.id === view.user);
  $("chat-title").textContent = chat ? chatName(chat) : "";
  $("chat-sub").textContent = chat && user
    ? (chat.type === "private" ? "private chat of " + user.first_name
                               : chat.members.length + " members · writing as " + user.first_name)
    : "";
}

function bubble(message) {
  const fromBot = message.from && message.from.is_bot;
  const mine = !fromBot && message.from && message.from.id === view.user;
  const node = el("div", { className: "msg" + (fromBot ? " bot" : mine ? " mine" : "") });
  node.dataset.messageId = message.message_id;
  if (!mine) node.append(el("div", { className: "who", textContent: message.from ? message.from.first_name : "?" }));
  const quoted = message.reply_to_message;
  if (quoted) {
    // A reply quotes the message it answers, as Telegram's clients do.
    const who = quoted.from ? quoted.from.first_name : "?";
    node.append(el("div", { className: "quote", textContent: who + ": " + (quoted.text || "") }));
  }
  node.append(el("div", { className: "text", textContent: message.text || "" }));
  const markup = message.reply_markup && message.reply_markup.inline_keyboard;
  if (markup) {
    const keyboard = el("div", { className: "keyboard" });
    for (const row of markup) {
      keyboard.append(el("div", { className: "row" }, ...row.map((b) => key(message, b))));
    }
    node.append(keyboard);
  }
  const when = new Date((message.date || 0) * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  node.append(el("div", { className: "meta", textContent: (message.edit_date ? "edited · " : "") + when }));
  return node;
}

function key(message, button) {
  if (button.url) return el("a", { href: button.url, target: "_blank", rel: "noreferrer", textContent: button.text });
  const node = el("button", { type: "button", textContent: button.text });
  node.dataset.data = button.callback_data || "";
  node.onclick = async () => {
    node.classList.add("tapped");
    try {
      await api("/sandbox/tap", { user: view.user, chat: message.chat.id,
                                 message_id: message.message_id, data: button.callback_data });
      showError("");
    } catch (error) { showError("Tap refused: " + error.message); }
    setTimeout(() => node.classList.remove("tapped"), 400);
  };
  return node;
}

// Scrolling to the end happens where the log changes size (see follow()), not here: a message
// is laid out, and its emojis' font loaded, only after it is added.
function showMessage(message, isEdit) {
  const log = $("log");
  const empty = log.querySelector(".empty");
  if (empty) empty.remove();
  const fresh = bubble(message);
  const old = log.querySelector(`.msg[data-message-id="${message.message_id}"]`);
  if (old) {
    old.replaceWith(fresh);
    if (isEdit) fresh.classList.add("flash");
  } else {
    log.append(fresh);
    if (!view.follow) $("jump").hidden = false;
  }
}

async function loadHistory() {
  const chat = view.chat;
  const messages = await api(`/sandbox/chats/${chat}/history`);
  if (chat !== view.chat) return;
  const log = $("log");
  log.replaceChildren();
  if (!messages.length) log.append(el("div", { className: "empty", textContent: "No messages yet — say /start" }));
  for (const message of messages) showMessage(message, false);
  toEnd();
}

// Keep the newest message in sight while following: the log grows on every new message, edit
// and late font, and the pane shrinks when a phone's keyboard opens; both land here.
function follow() {
  const box = $("messages");
  const keep = new ResizeObserver(() => { if (view.follow) box.scrollTop = box.scrollHeight; });
  keep.observe($("log"));
  keep.observe(box);
  box.addEventListener("scroll", () => {
    view.follow = nearEnd();
    if (view.follow) $("jump").hidden = true;
  });
  $("jump").onclick = toEnd;
}

async function pickUser(userId) {
  view.user = userId;
  const chats = chatsOf(userId);
  if (!chats.some((c) => c.id === view.chat)) view.chat = userId;
  renderUsers();
  await pickChat(view.chat);
}

async function pickChat(chatId) {
  view.chat = chatId;
  delete view.unread[chatId];
  renderChats();
  renderHeader();
  await loadHistory();
  $("text").focus();
}

function renderStats(stats) {
  const items = [["delivered", "sent"], ["edited", "edits"], ["too_many_requests", "429s"],
                 ["forbidden", "403s"], ["bad_requests", "400s"], ["faults", "faults"]];
  $("stats").replaceChildren(...items.map(([field, label]) => {
    const hot = field !== "delivered" && field !== "edited" && stats[field] > 0;
    const span = el("span", { className: hot ? "hot" : "", textContent: `${label} ${stats[field]}` });
    span.dataset.stat = field;
    return span;
  }));
}

async function refreshState() {
  const state = await api("/sandbox/state");
  Object.assign(view, { users: state.users, chats: state.chats });
  renderUsers();
  renderChats();
}

function onMessageEvent(message, isEdit) {
  const chatId = message.chat && message.chat.id;
  if (!view.chats.some((c) => c.id === chatId) || (message.from && !message.from.is_bot
      && !view.users.some((u) => u.id === message.from.id))) {
    refreshState().catch(() => {});  // someone new: a user or chat made after the page loaded
  }
  if (chatId === view.chat) { showMessage(message, isEdit); return; }
  if (!isEdit && message.from && message.from.is_bot) {
    view.unread[chatId] = (view.unread[chatId] || 0) + 1;
    renderChats();
  }
}

// The browser reconnects a dropped stream by itself (the sandbox restarting, say) but gives up
// on one refused with an HTTP error: then ask the API why, and a 403 means a stale token.
function listen(wasOpen = false) {
  const stream = new EventSource("/sandbox/stream?token=" + encodeURIComponent(token));
  stream.onopen = () => {
    $("live").classList.add("on");
    if (wasOpen && view.chat !== null) {  // catch up after a gap: a restart may have new users
      refreshState().then(loadHistory).catch(() => {});
    }
    wasOpen = true;
  };
  stream.onerror = () => {
    $("live").classList.remove("on");
    if (stream.readyState !== EventSource.CLOSED) return;
    api("/sandbox/state").catch(() => {});  // a 403 reloads the page onto its explanation
    setTimeout(() => listen(wasOpen), 2000);
  };
  stream.addEventListener("message", (e) => onMessageEvent(JSON.parse(e.data), false));
  stream.addEventListener("edit", (e) => onMessageEvent(JSON.parse(e.data), true));
  stream.addEventListener("stats", (e) => renderStats(JSON.parse(e.data)));
  stream.addEventListener("answer", (e) => {
    const answer = JSON.parse(e.data);
    if (answer.chat === view.chat && answer.user === view.user && answer.text) toast(answer.text);
  });
}

function insert(text) {
  const input = $("text");
  const at = input.selectionStart ?? input.value.length;
  input.value = input.value.slice(0, at) + text + input.value.slice(input.selectionEnd ?? at);
  input.focus();
  input.selectionStart = input.selectionEnd = at + text.length;
}

async function send(event) {
  event.preventDefault();
  const input = $("text");
  const text = input.value;
  if (!text.trim()) return;
  $("send").disabled = true;
  toEnd();  // the sender wants to see their message and the answer, wherever they were reading
  try {
    await api("/sandbox/say", { user: view.user, chat: view.chat, text });
    input.value = "";
    showError("");
  } catch (error) {
    showError("Not sent: " + error.message);
  } finally {
    $("send").disabled = false;
    input.focus();
  }
}

async function main() {
  if (!token) { showError("This page needs its ?token=… (the sandbox's control token)."); return; }
  try {
    const state = await api("/sandbox/state");
    Object.assign(view, { users: state.users, chats: state.chats, bot: state.bot });
    $("palette").replaceChildren(...(state.palette || []).map((emoji) => {
      const button = el("button", { type: "button", textContent: emoji, title: "insert " + emoji });
      button.onclick = () => insert(emoji);
      return button;
    }));
    $("commands").replaceChildren(...COMMANDS.map((command) => {
      const button = el("button", { type: "button", textContent: command });
      button.onclick = () => insert(command + " ");
      return button;
    }));
    $("composer").addEventListener("submit", send);
    follow();
    listen();
    await pickUser(view.users.length ? view.users[0].id : null);
  } catch (error) {
    showError("Cannot reach the sandbox: " + error.message);
  }
}

main();
