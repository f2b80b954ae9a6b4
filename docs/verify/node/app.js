// Receives hookinbox's deliveries, verifies each one with the official
// Standard Webhooks library, and does the event's work once per webhook-id
// with hookinbox's idempotency keys, through the keys helper (clients/node).
//
//   npm ci
//   HOOKINBOX_DESTINATION_SECRET=whsec_... \
//   HOOKINBOX_KEYS_URL=http://127.0.0.1:9090 HOOKINBOX_KEYS_TOKEN=... \
//   PORT=3000 node app.js
//
// The secret is the source's destination_secret (hookinbox prints a
// generated one once, and keeps it under its data_dir/secrets/). The keys
// URL is hookinbox's admin listener; the token is a [[keys.client]] token.
import fs from "node:fs";
import http from "node:http";
import { KeyBusy, Keys } from "hookinbox-keys";
import { Webhook } from "standardwebhooks";

const hook = new Webhook(process.env.HOOKINBOX_DESTINATION_SECRET);
const keys = new Keys(); // HOOKINBOX_KEYS_URL and HOOKINBOX_KEYS_TOKEN
const sentHere = new Set(); // for the test hook below only

// Once per webhook-id (the first argument): done before, the stored result
// comes back and nothing runs; another delivery of it at work now, KeyBusy
// (answered 503, hookinbox retries); the work throwing, the key is released.
// The event's side effect stands for "send the confirmation email": one
// line appended to OUTBOX_FILE.
const sendEmail = keys.idempotent(
  async (webhookId, event, type) => {
    fs.appendFileSync(process.env.OUTBOX_FILE || "outbox.txt", `${webhookId} ${type} ${event.id ?? ""}\n`);
    sentHere.add(webhookId);
    return { sent: event.id ?? null };
  },
  { key: (webhookId) => webhookId, onBusy: "raise" },
);

async function handle(body, headers) {
  try {
    // The raw bytes, as received: never a re-serialised JSON object.
    // Refuses a wrong signature and a timestamp more than 5 min off.
    hook.verify(body, headers);
  } catch (e) {
    return [400, {}, `not verified: ${e.message}`];
  }
  let event;
  try {
    event = JSON.parse(body.toString("utf8"));
  } catch (e) {
    return [400, {}, `not JSON: ${e.message}`];
  }
  // The same on every retry and replay of one event: the idempotency key.
  // (A business key such as `order:123:confirmation-email` works too.)
  const id = headers["webhook-id"];
  try {
    await sendEmail(id, event, headers["hookinbox-event-type"]);
  } catch (e) {
    if (e instanceof KeyBusy) {
      // Another delivery of this event is at work: hookinbox retries later.
      return [503, e.retryAfter ? { "retry-after": String(Math.ceil(e.retryAfter)) } : {}, "busy"];
    }
    return [500, {}, `failed: ${e.message}`]; // hookinbox retries
  }
  // Test hook only: die after complete, before answering (the crash keys fix).
  const crash = process.env.EXAMPLE_CRASH_AFTER_COMPLETE;
  if (crash && event.id === crash && sentHere.has(id)) process.exit(3);
  return [204, {}, ""]; // done now, or done before: either way, taken
}

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", async () => {
      const [status, headers, text] = await handle(Buffer.concat(chunks), req.headers);
      res.writeHead(status, headers).end(text);
    });
  })
  .listen(Number(process.env.PORT || 3000), "127.0.0.1");
