// Receives hookinbox's deliveries and verifies each one with the official
// Standard Webhooks library before acting on it.
//
//   npm ci
//   HOOKINBOX_DESTINATION_SECRET=whsec_... PORT=3000 node app.js
//
// The secret is the source's destination_secret (hookinbox prints a
// generated one once, and keeps it under its data_dir/secrets/).
"use strict";
const http = require("node:http");
const { Webhook } = require("standardwebhooks");

const hook = new Webhook(process.env.HOOKINBOX_DESTINATION_SECRET);
// Demo only: keep processed webhook-ids in your database, in the same
// transaction as the work the event causes.
const processed = new Set();

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      try {
        // The raw bytes, as received: never a re-serialised JSON object.
        // Refuses a wrong signature and a timestamp more than 5 min off.
        hook.verify(body, req.headers);
      } catch (e) {
        res.writeHead(400).end(`not verified: ${e.message}`);
        return;
      }
      // The same on every retry and replay of one event: dedupe on it.
      const id = req.headers["webhook-id"];
      if (!processed.has(id)) {
        processed.add(id);
        const event = JSON.parse(body.toString("utf8"));
        console.log(`verified ${id} ${req.headers["hookinbox-event-type"]} ${event.id ?? ""}`);
      }
      res.writeHead(204).end();
    });
  })
  .listen(Number(process.env.PORT || 3000), "127.0.0.1");
