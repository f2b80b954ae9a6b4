// Checks answers of the tests' fake GitHub API against GitHub's own OpenAPI
// description (@octokit/openapi, api.github.com): each answer must match the
// schema the description gives for that operation and status.
//
//   node conform.mjs METHOD PATH STATUS FILE [METHOD PATH STATUS FILE]...
//
// PATH is the description's path template (`/repos/{owner}/{repo}/hooks/{hook_id}`),
// FILE the answer's body (JSON). Prints one line per answer; exits 1 on the
// first that does not match, naming where.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';

const require = createRequire(import.meta.url);
const description = require('@octokit/openapi/generated/api.github.com.json');

// OpenAPI 3.0's `nullable: true` is JSON Schema's `type: [T, "null"]`; the
// rest of its schema objects is JSON Schema as Ajv reads it.
function toJsonSchema(node) {
  if (Array.isArray(node)) return node.map(toJsonSchema);
  if (!node || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'nullable' || k === 'example' || k === 'examples' || k === 'x-github') continue;
    out[k] = toJsonSchema(v);
  }
  if (node.nullable === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    else if (!out.type) return { anyOf: [out, { type: 'null' }] };
  }
  return out;
}

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
// Local `#/components/…` references resolve inside the added document.
function resolveRefs(node) {
  if (Array.isArray(node)) return node.map(resolveRefs);
  if (!node || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `gh${v}` : resolveRefs(v);
  }
  return out;
}
ajv.addSchema(resolveRefs({ $id: 'gh', components: toJsonSchema(description.components) }));

const args = process.argv.slice(2);
if (args.length === 0 || args.length % 4 !== 0) {
  console.error('usage: node conform.mjs METHOD PATH STATUS FILE [...]');
  process.exit(2);
}
for (let i = 0; i < args.length; i += 4) {
  const [method, path, status, file] = args.slice(i, i + 4);
  const operation = description.paths[path]?.[method.toLowerCase()];
  if (!operation) {
    console.error(`${method} ${path}: not in GitHub's description`);
    process.exit(1);
  }
  let response = operation.responses[status];
  if (response?.$ref) {
    response = response.$ref.split('/').slice(1).reduce((o, k) => o[k], description);
  }
  const schema = response?.content?.['application/json']?.schema;
  if (!schema) {
    console.error(`${method} ${path} ${status}: the description gives no JSON body`);
    process.exit(1);
  }
  const validate = ajv.compile(resolveRefs(toJsonSchema(schema)));
  const body = JSON.parse(readFileSync(file, 'utf8'));
  if (!validate(body)) {
    console.error(`${method} ${path} ${status}: the fake's answer does not match GitHub's description:`);
    console.error(JSON.stringify(validate.errors.slice(0, 5), null, 2));
    process.exit(1);
  }
  console.log(`${method} ${path} ${status}: matches GitHub's description`);
}
