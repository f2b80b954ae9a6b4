// Signs one request per provider with the provider's own Node SDK (or, where
// the SDK has no signer, with node:crypto from the documented formula) and
// checks it with that SDK's own verifier, clock frozen at the signing time.
// Usage: node node/sdk.mjs OUT_DIR

import { createHash, createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import Stripe from "stripe";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import twilio from "twilio";
import { sign as githubSign, verify as githubVerify } from "@octokit/webhooks-methods";
import { LinearWebhookClient } from "@linear/sdk/webhooks";
import { Paddle } from "@paddle/paddle-node-sdk";
import "@shopify/shopify-api/adapters/node";
import { shopifyApi, ApiVersion, LogSeverity } from "@shopify/shopify-api";
import { getHmac } from "@shopify/shopify-api/test-helpers";
import bolt from "@slack/bolt";
import { AwsLambdaReceiver } from "@zoom/rivet/meetings";

import { atClock, expect, expectEqual, finish, random, tamper, write } from "./lib.mjs";

const outDir = process.argv[2];
if (!outDir) {
  console.error("usage: node node/sdk.mjs OUT_DIR");
  process.exit(2);
}

// The sdk field names the version actually installed, read from its own
// package.json (some packages do not export it, so read the file).
const here = dirname(fileURLToPath(import.meta.url));
function sdk(name) {
  const pkg = JSON.parse(readFileSync(join(here, "..", "node_modules", name, "package.json"), "utf8"));
  return `${name}@${pkg.version} (npm)`;
}

const hmacHex = (algorithm, key, text) => createHmac(algorithm, key).update(text, "utf8").digest("hex");

// One signing time for the whole run; every vector that signs a timestamp uses it.
const ts = Math.floor(Date.now() / 1000);
let written = 0;
function emit(file, vector) {
  write(outDir, file, vector);
  written += 1;
}

// ---- Stripe -------------------------------------------------------------
{
  const file = "stripe_node";
  const stripe = new Stripe("sk_test_unused_the_generator_makes_no_api_calls");
  const secret = `whsec_${random.alnum(32)}`;
  const body = '{"id":"evt_hookinbox_0001","object":"event","type":"payment_intent.succeeded","created":1700000000,"data":{"object":{"id":"pi_1","amount":4200,"description":"café"}}}';
  const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: ts });
  const construct = (b, at) => stripe.webhooks.constructEvent(b, header, secret, 300, undefined, at * 1000);
  const ok = [
    await expect(file, "signed", true, () => construct(body, ts)),
    await expect(file, "tampered body", false, () => construct(tamper(body), ts)),
    await expect(file, "310 s late", false, () => construct(body, ts + 310)),
  ].every(Boolean);
  emit(file, {
    provider: "stripe",
    sdk: sdk("stripe"),
    function: "stripe.webhooks.generateTestHeaderString({payload, secret, timestamp})",
    verified_by: "stripe.webhooks.constructEvent(body, header, secret, 300, undefined, receivedAtMs) at ts; refuses a tampered body and receivedAt ts+310",
    sdk_verified: ok,
    secret,
    timestamp: ts,
    method: "POST",
    content_type: "application/json",
    body,
    headers: { "Stripe-Signature": header },
  });
}

// ---- Standard Webhooks and Svix (the same scheme, two SDKs) ---------------
const standardBody = '{"type":"contact.created","timestamp":"2023-11-14T22:13:20Z","data":{"id":"1f81eb52","name":"café"}}';
for (const [file, provider, Webhook, pkg, prefix] of [
  ["standardwebhooks_node", "standardwebhooks", StandardWebhook, "standardwebhooks", "webhook"],
  ["svix_node", "svix", SvixWebhook, "svix", "svix"],
]) {
  // Svix and Standard Webhooks keys are whsec_ + base64 of 24 random bytes.
  const secret = `whsec_${random.base64(24)}`;
  const wh = new Webhook(secret);
  const msgId = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W";
  const signature = wh.sign(msgId, new Date(ts * 1000), standardBody);
  const headers = {
    [`${prefix}-id`]: msgId,
    [`${prefix}-timestamp`]: String(ts),
    [`${prefix}-signature`]: signature,
  };
  const verify = (b, at) => atClock(at, () => (wh.verify(b, headers), true));
  const ok = [
    await expect(file, "signed", true, () => verify(standardBody, ts)),
    await expect(file, "tampered body", false, () => verify(tamper(standardBody), ts)),
    await expect(file, "310 s late", false, () => verify(standardBody, ts + 310)),
    await expect(file, "310 s early", false, () => verify(standardBody, ts - 310)),
  ].every(Boolean);
  emit(file, {
    provider,
    sdk: sdk(pkg),
    function: `new Webhook(secret).sign(msgId, date, payload) from ${pkg}`,
    verified_by: "new Webhook(secret).verify(payload, headers) with Date frozen at ts; refuses a tampered body and a clock 310 s either side",
    sdk_verified: ok,
    secret,
    timestamp: ts,
    method: "POST",
    content_type: "application/json",
    body: standardBody,
    headers,
  });
}

// ---- GitHub -------------------------------------------------------------
{
  const file = "github_node";
  const secret = random.hex(20);
  const body = '{"action":"opened","issue":{"number":1347,"title":"café"},"repository":{"id":1296269,"full_name":"octocat/Hello-World"}}';
  const signature = await githubSign(secret, body);
  const ok = [
    await expect(file, "signed", true, () => githubVerify(secret, body, signature)),
    await expect(file, "tampered body", false, () => githubVerify(secret, tamper(body), signature)),
  ].every(Boolean);
  emit(file, {
    provider: "github",
    sdk: sdk("@octokit/webhooks-methods"),
    function: "sign(secret, payload) from @octokit/webhooks-methods for X-Hub-Signature-256; the legacy X-Hub-Signature (sha1=) via node:crypto, which v6 no longer makes",
    verified_by: "verify(secret, payload, signature) from @octokit/webhooks-methods on X-Hub-Signature-256; refuses a tampered body",
    sdk_verified: ok,
    secret,
    timestamp: null,
    method: "POST",
    content_type: "application/json",
    body,
    headers: {
      "X-GitHub-Event": "issues",
      "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
      "X-Hub-Signature-256": signature,
      "X-Hub-Signature": `sha1=${hmacHex("sha1", secret, body)}`,
    },
  });
}

// GitHub's published example (docs: "Validating webhook deliveries"): fixed
// inputs, so the SDK must still produce the published value.
{
  const file = "github_node_docs_vector";
  const secret = "It's a Secret to Everybody";
  const body = "Hello, World!";
  const published = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
  const signature = await githubSign(secret, body);
  const ok = [
    expectEqual(file, "sign() on the published inputs", signature, published),
    await expect(file, "published signature", true, () => githubVerify(secret, body, published)),
    await expect(file, "tampered body", false, () => githubVerify(secret, tamper(body), published)),
  ].every(Boolean);
  emit(file, {
    provider: "github",
    sdk: sdk("@octokit/webhooks-methods"),
    function: "sign() on GitHub's published test vector",
    verified_by: `equality with docs value ${published}; verify() accepts it and refuses a tampered body`,
    sdk_verified: ok,
    secret,
    timestamp: null,
    method: "POST",
    content_type: "text/plain",
    body,
    headers: { "X-Hub-Signature-256": signature },
  });
}

// ---- Linear -------------------------------------------------------------
{
  const file = "linear_node";
  const secret = `lin_wh_${random.alnum(40)}`;
  // Linear signs its timestamp inside the body (webhookTimestamp, in ms), and
  // the SDK checks it against the clock: it has to be the signing time.
  const body = `{"action":"create","type":"Issue","data":{"id":"2174add1","title":"café"},"url":"https://linear.app/x/issue/X-1","webhookTimestamp":${ts * 1000},"webhookId":"000042e3"}`;
  const signature = hmacHex("sha256", secret, body);
  const client = new LinearWebhookClient(secret);
  const verify = (b, at) => atClock(at, () => client.verify(Buffer.from(b, "utf8"), signature));
  const ok = [
    await expect(file, "signed", true, () => verify(body, ts)),
    await expect(file, "tampered body", false, () => verify(tamper(body), ts)),
    await expect(file, "70 s late", false, () => verify(body, ts + 70)),
    await expect(file, "70 s early", false, () => verify(body, ts - 70)),
  ].every(Boolean);
  emit(file, {
    provider: "linear",
    sdk: sdk("@linear/sdk"),
    function: "(no signer in SDK) hex(HMAC_SHA256(secret, raw body)) via node:crypto",
    verified_by: "new LinearWebhookClient(secret).verify(rawBody, signature) from @linear/sdk/webhooks with Date frozen at ts (checks body.webhookTimestamp within 60 s); refuses a tampered body and a clock 70 s either side",
    sdk_verified: ok,
    secret,
    timestamp: ts,
    method: "POST",
    content_type: "application/json",
    body,
    headers: {
      "Linear-Signature": signature,
      "Linear-Delivery": "234d1a4e-b617-4388-90fe-adc3633d6b72",
      "Linear-Event": "Issue",
      "Linear-Timestamp": String(ts * 1000),
    },
  });
}

// ---- Paddle -------------------------------------------------------------
const paddleBody = '{"event_id":"evt_01hookinbox000000000000000","event_type":"transaction.completed","occurred_at":"2023-11-14T22:13:20.000000Z","notification_id":"ntf_01hookinbox000000000000000","data":{"id":"txn_01","note":"café"}}';
{
  const file = "paddle_node";
  // Paddle notification secrets: pdl_ntfset_<ulid>_<random>.
  const secret = `pdl_ntfset_01${random.lower32(24)}_${random.alnum(32)}`;
  const header = `ts=${ts};h1=${hmacHex("sha256", secret, `${ts}:${paddleBody}`)}`;
  const paddle = new Paddle("pdl_sdbx_apikey_unused_the_generator_makes_no_api_calls");
  const verify = (b, at) => atClock(at, () => paddle.webhooks.isSignatureValid(b, secret, header));
  const ok = [
    await expect(file, "signed", true, () => verify(paddleBody, ts)),
    await expect(file, "tampered body", false, () => verify(tamper(paddleBody), ts)),
    await expect(file, "10 s late", false, () => verify(paddleBody, ts + 10)),
  ].every(Boolean);
  emit(file, {
    provider: "paddle",
    sdk: sdk("@paddle/paddle-node-sdk"),
    function: "(no signer in SDK) ts=<ts>;h1=hex(HMAC_SHA256(secret, ts+':'+body)) via node:crypto",
    verified_by: "paddle.webhooks.isSignatureValid(body, secret, header) with Date frozen at ts (5 s tolerance, past only); refuses a tampered body and ts+10",
    sdk_verified: ok,
    secret,
    timestamp: ts,
    method: "POST",
    content_type: "application/json",
    body: paddleBody,
    headers: { "Paddle-Signature": header },
  });
}

// ---- Shopify ------------------------------------------------------------
{
  const file = "shopify_node";
  const secret = `shpss_${random.hex(16)}`;
  const body = '{"id":820982911946154508,"email":"jon@example.com","note":"café","total_price":"42.00"}';
  const hmac = getHmac(body, secret);
  const headers = {
    "X-Shopify-Topic": "orders/create",
    "X-Shopify-Hmac-Sha256": hmac,
    "X-Shopify-Shop-Domain": "hookinbox-test.myshopify.com",
    "X-Shopify-API-Version": "2025-10",
    "X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
    "X-Shopify-Event-Id": "98880550-7158-44d4-b7cd-2c97c8a091b5",
    "X-Shopify-Triggered-At": "2023-11-14T22:13:20.000000000Z",
  };
  const shopify = shopifyApi({
    apiKey: "hookinbox-vectors",
    apiSecretKey: secret,
    hostName: "hookinbox.example",
    apiVersion: ApiVersion.October25,
    isEmbeddedApp: false,
    logger: { level: LogSeverity.Error },
  });
  // The node adapter reads an IncomingMessage: headers arrive lower-cased.
  const rawRequest = {
    method: "POST",
    url: "/in/shopify",
    headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
  };
  const validate = (b) => shopify.webhooks.validate({ rawBody: b, rawRequest, rawResponse: {} });
  const result = await validate(body);
  const ok = [
    await expect(file, "signed", true, async () => (await validate(body)).valid),
    await expect(file, "tampered body", false, async () => (await validate(tamper(body))).valid),
  ].every(Boolean);
  emit(file, {
    provider: "shopify",
    sdk: sdk("@shopify/shopify-api"),
    function: "getHmac(body, apiSecretKey) from @shopify/shopify-api/test-helpers",
    verified_by: "shopifyApi({apiSecretKey}).webhooks.validate({rawBody, rawRequest}); refuses a tampered body",
    sdk_verified: ok,
    sdk_result: result,
    secret,
    timestamp: null,
    method: "POST",
    content_type: "application/json",
    body,
    headers,
  });
}

// ---- Slack --------------------------------------------------------------
{
  const file = "slack_node";
  const secret = random.hex(16);
  const body = '{"token":"x","team_id":"T1","api_app_id":"A1","event":{"type":"message","text":"café","channel":"C1","ts":"1700000000.000100"},"type":"event_callback","event_id":"Ev0HOOKINBOX1","event_time":1700000000}';
  const signature = `v0=${hmacHex("sha256", secret, `v0:${ts}:${body}`)}`;
  // verifySlackRequest throws to refuse and returns nothing to accept.
  const verify = (b, at) => {
    bolt.verifySlackRequest({
      signingSecret: secret,
      body: b,
      headers: { "x-slack-request-timestamp": ts, "x-slack-signature": signature },
      nowMilliseconds: at * 1000,
    });
    return true;
  };
  const ok = [
    await expect(file, "signed", true, () => verify(body, ts)),
    await expect(file, "tampered body", false, () => verify(tamper(body), ts)),
    await expect(file, "310 s late", false, () => verify(body, ts + 310)),
  ].every(Boolean);
  emit(file, {
    provider: "slack",
    sdk: sdk("@slack/bolt"),
    function: "(no signer in @slack/bolt) v0= + hex(HMAC_SHA256(secret, 'v0:'+ts+':'+body)) via node:crypto",
    verified_by: "verifySlackRequest({signingSecret, body, headers, nowMilliseconds: ts}) from @slack/bolt; refuses a tampered body and now = ts+310 (bolt checks only the past side)",
    sdk_verified: ok,
    secret,
    timestamp: ts,
    method: "POST",
    content_type: "application/json",
    body,
    headers: {
      "X-Slack-Request-Timestamp": String(ts),
      "X-Slack-Signature": signature,
    },
  });
}

// ---- Twilio -------------------------------------------------------------
{
  const file = "twilio_node";
  const authToken = random.hex(16);
  const url = "https://hookinbox.example/in/twilio/sms?tenant=acme";
  const params = {
    AccountSid: "AC00000000000000000000000000000001",
    MessageSid: "SM00000000000000000000000000000001",
    From: "+14158675309",
    To: "+18005551212",
    Body: "Héllo wörld & more",
    NumMedia: "0",
  };
  // Twilio signs the URL and the form params, not the raw body: a tampered
  // body is checked as the params it parses back into.
  const body = new URLSearchParams(params).toString();
  const paramsOf = (b) => Object.fromEntries(new URLSearchParams(b));
  const signature = twilio.getExpectedTwilioSignature(authToken, url, params);
  const ok = [
    await expect(file, "signed", true, () => twilio.validateRequest(authToken, signature, url, paramsOf(body))),
    await expect(file, "tampered body", false, () => twilio.validateRequest(authToken, signature, url, paramsOf(tamper(body)))),
  ].every(Boolean);
  emit(file, {
    provider: "twilio",
    sdk: sdk("twilio"),
    function: "twilio.getExpectedTwilioSignature(authToken, url, params)",
    verified_by: "twilio.validateRequest(authToken, signature, url, params); refuses the params of a tampered body",
    sdk_verified: ok,
    secret: authToken,
    timestamp: null,
    method: "POST",
    url,
    params,
    content_type: "application/x-www-form-urlencoded",
    body,
    headers: {
      "X-Twilio-Signature": signature,
      "I-Twilio-Idempotency-Token": "hookinbox-idem-0001",
    },
  });
}
{
  const file = "twilio_node_json";
  const authToken = random.hex(16);
  const body = '{"property":"value","note":"café"}';
  // JSON bodies: Twilio puts the body's SHA-256 in the URL and signs the URL.
  const url = `https://hookinbox.example/in/twilio/json?bodySHA256=${createHash("sha256").update(body, "utf8").digest("hex")}`;
  const signature = twilio.getExpectedTwilioSignature(authToken, url, {});
  const ok = [
    await expect(file, "signed", true, () => twilio.validateRequestWithBody(authToken, signature, url, body)),
    await expect(file, "tampered body", false, () => twilio.validateRequestWithBody(authToken, signature, url, tamper(body))),
  ].every(Boolean);
  emit(file, {
    provider: "twilio",
    sdk: sdk("twilio"),
    function: "getExpectedTwilioSignature(authToken, url?bodySHA256=<hex sha256(body)>, {}); the hash via node:crypto",
    verified_by: "twilio.validateRequestWithBody(authToken, signature, url, body); refuses a tampered body",
    sdk_verified: ok,
    secret: authToken,
    timestamp: null,
    method: "POST",
    url,
    params: {},
    content_type: "application/json",
    body,
    headers: { "X-Twilio-Signature": signature },
  });
}

// ---- Zoom ---------------------------------------------------------------
// @zoom/rivet has no signer and no exported verify function, but its
// AwsLambdaReceiver is a plain function of {body, headers}: called in-process
// it runs the SDK's own check (CommonHttpRequest.isEventVerified) with no
// server. It re-serialises the parsed body (JSON.stringify) before the HMAC,
// so it only accepts compact JSON like Zoom's, and it checks no timestamp age.
{
  const secret = random.base64url(16);
  const receiver = new AwsLambdaReceiver({ webhooksSecretToken: secret });
  const handler = receiver.start();
  const call = async (body, headers) => {
    const debug = console.debug;
    console.debug = () => {}; // rivet logs every event it processes
    try {
      return await handler({ body, headers, isBase64Encoded: false }, {});
    } finally {
      console.debug = debug;
    }
  };
  const sign = (body) => `v0=${hmacHex("sha256", secret, `v0:${ts}:${body}`)}`;
  // Bodies keep fixed event times (the same 2023 instant as the other
  // providers' bodies), so a regeneration changes only secrets, signed
  // timestamps and signatures; nothing verifies event_ts.
  const eventTs = 1700000000417;
  const common = {
    provider: "zoom",
    sdk: sdk("@zoom/rivet"),
    function: "(no signer in @zoom/rivet) x-zm-signature: v0= + hex(HMAC_SHA256(secret, 'v0:'+ts+':'+body)) via node:crypto, formula from developers.zoom.us/docs/api/webhooks (Verify webhook events)",
  };

  const startedFile = "zoom_node";
  const started = `{"event":"meeting.started","event_ts":${eventTs},"payload":{"account_id":"AAAAAABBBB0hookinbox","object":{"id":"85136318357","uuid":"4444AAAiAAAAAiAiAiiAii==","host_id":"x1yCzABCDEfg23HiJKl4mN","topic":"Café sync","type":2,"start_time":"2023-11-14T22:13:20Z","timezone":"Europe/Paris","duration":30}}}`;
  const startedHeaders = { "x-zm-request-timestamp": String(ts), "x-zm-signature": sign(started) };
  const okStarted = [
    await expect(startedFile, "signed", true, async () => (await call(started, startedHeaders)).statusCode === 200),
    await expect(startedFile, "tampered body", false, async () => (await call(tamper(started), startedHeaders)).statusCode === 200),
  ].every(Boolean);
  emit(startedFile, {
    ...common,
    verified_by: "new AwsLambdaReceiver({webhooksSecretToken}).start() from @zoom/rivet/meetings, called in-process with {body, headers}: 200; refuses a tampered body with 400 (rivet checks no timestamp age)",
    sdk_verified: okStarted,
    secret,
    timestamp: ts,
    method: "POST",
    content_type: "application/json",
    body: started,
    headers: startedHeaders,
  });

  const validationFile = "zoom_node_url_validation";
  const plainToken = "qgg8vlvZRS6UYooatFL8Aw";
  const validation = `{"payload":{"plainToken":"${plainToken}"},"event_ts":${eventTs},"event":"endpoint.url_validation"}`;
  const validationHeaders = { "x-zm-request-timestamp": String(ts), "x-zm-signature": sign(validation) };
  const wanted = { plainToken, encryptedToken: hmacHex("sha256", secret, plainToken) };
  const answer = await call(validation, validationHeaders);
  const okValidation = [
    await expect(validationFile, "signed", true, () => answer.statusCode === 200),
    expectEqual(validationFile, "rivet's plainToken", JSON.parse(answer.body).plainToken, wanted.plainToken),
    expectEqual(validationFile, "rivet's encryptedToken", JSON.parse(answer.body).encryptedToken, wanted.encryptedToken),
    await expect(validationFile, "tampered body", false, async () => (await call(tamper(validation), validationHeaders)).statusCode === 200),
  ].every(Boolean);
  emit(validationFile, {
    ...common,
    verified_by: "new AwsLambdaReceiver({webhooksSecretToken}).start() from @zoom/rivet/meetings, called in-process with {body, headers}: 200 with {plainToken, encryptedToken} equal to expect; refuses a tampered body with 400 (rivet checks no timestamp age)",
    sdk_verified: okValidation,
    secret,
    timestamp: ts,
    method: "POST",
    content_type: "application/json",
    body: validation,
    headers: validationHeaders,
    expect: wanted,
  });
}

finish("node", written);
