#!/usr/bin/env node
// Checks Grafana dashboard JSON files against Grafana's own types, then
// against the rules of this repository's dashboards.
//
//   npm ci --prefix tests/grafana --no-audit --no-fund
//   node tests/grafana/validate.mjs packaging/monitoring/hookinbox.dashboard.json
//   node tests/grafana/validate.mjs --metrics scrape.txt [--allow-metric NAME]... \
//     [--rules packaging/monitoring/hookinbox.rules.yml] FILE...
//
// 1. Schema. Grafana publishes no JSON Schema of the dashboard on npm or PyPI
//    (the foundation SDK's JSON Schemas live only in its repository), but it
//    publishes the TypeScript types generated from the same CUE schemas:
//    @grafana/schema (the dashboard, its panels, variables, field config, and
//    every core panel's options and field config) and
//    @grafana/grafana-foundation-sdk (the Prometheus query). The script writes
//    a TypeScript module in memory that assigns the dashboard, and then each
//    panel, as object literals to those types, and type-checks it with the
//    TypeScript compiler API. An object literal gets TypeScript's
//    excess-property check, so a misspelt or unknown field fails as well as a
//    wrong type or a missing required field. JSON has no enums, so the types
//    are mapped first (Json<T>): a string enum becomes the union of its
//    values ("palette-classic" | "fixed" | …), methods are dropped.
//    Errors are reported with the JSON path of the offending field.
// 2. Sanity the types cannot express: unique panel ids, gridPos inside the
//    24 columns and no two panels overlapping, every query panel with
//    targets, every target with an expr and a unique refId, every datasource
//    reference the ${datasource} variable, every $variable defined, id null
//    and no __inputs (so the file imports as is).
// 3. With --metrics FILE (a scrape in the Prometheus text format): every
//    metric name the queries use is in it (histogram _bucket/_sum/_count
//    included); --allow-metric NAME adds a name not in the scrape (`up` is
//    always allowed). --rules FILE checks the `expr`s of a Prometheus rule
//    file the same way (its exprs written on one line or as a `|` or `>`
//    block, as promtool accepts; the rules themselves are promtool's job).
//
// Exit status: 0 all files pass, 1 a file fails, 2 usage.

import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
let ts;
try {
  ts = require('typescript');
} catch {
  console.error('typescript is not installed: run `npm ci --prefix tests/grafana --no-audit --no-fund` first');
  process.exit(2);
}
const installedVersion = (name) =>
  JSON.parse(fs.readFileSync(path.join(here, 'node_modules', name, 'package.json'), 'utf8')).version.replace(/^v/, '');
const schemaVersion = installedVersion('@grafana/schema');
const sdkVersion = installedVersion('@grafana/grafana-foundation-sdk');

// Grafana panel plugin id → its options types in @grafana/schema
// (raw/composable/<dir>/panelcfg/x/<Module>_types.gen), and whether the
// panel has a custom field config there.
const PANEL_TYPES = {
  timeseries: ['timeseries', 'TimeSeriesPanelCfg', true],
  stat: ['stat', 'StatPanelCfg', false],
  'state-timeline': ['statetimeline', 'StateTimelinePanelCfg', true],
  'status-history': ['statushistory', 'StatusHistoryPanelCfg', true],
  gauge: ['gauge', 'GaugePanelCfg', false],
  bargauge: ['bargauge', 'BarGaugePanelCfg', false],
  table: ['table', 'TablePanelCfg', true],
  text: ['text', 'TextPanelCfg', false],
  piechart: ['piechart', 'PieChartPanelCfg', true],
  histogram: ['histogram', 'HistogramPanelCfg', true],
  heatmap: ['heatmap', 'HeatmapPanelCfg', true],
  barchart: ['barchart', 'BarChartPanelCfg', true],
  trend: ['trend', 'TrendPanelCfg', true],
  xychart: ['xychart', 'XYChartPanelCfg', true],
};
// Panels that show no query results.
const NO_QUERY = new Set(['text', 'dashlist', 'news', 'annolist']);
const DATASOURCE_VAR = '${datasource}';
const GRID_COLUMNS = 24;

function usage(message) {
  if (message) console.error(message);
  console.error('usage: node validate.mjs [--metrics SCRAPE.txt [--allow-metric NAME]... [--rules RULES.yml]...] [--print-ts] DASHBOARD.json...');
  process.exit(2);
}

const files = [];
const ruleFiles = [];
const metricFiles = [];
const allowedMetrics = new Set();
let printTs = false;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--metrics') metricFiles.push(argv[++i] ?? usage('--metrics needs a file'));
  else if (a === '--allow-metric') allowedMetrics.add(argv[++i] ?? usage('--allow-metric needs a name'));
  else if (a === '--rules') ruleFiles.push(argv[++i] ?? usage('--rules needs a file'));
  else if (a === '--print-ts') printTs = true;
  else if (a === '-h' || a === '--help') usage();
  else if (a.startsWith('-')) usage(`unknown option ${a}`);
  else files.push(a);
}
if (files.length === 0 && ruleFiles.length === 0) usage('no dashboard file given');
if (ruleFiles.length > 0 && metricFiles.length === 0) usage('--rules needs --metrics');

// ---------------------------------------------------------------- helpers

/** Every panel with its JSON path: top-level ones, and those inside rows. */
function allPanels(dashboard) {
  const out = [];
  (dashboard.panels ?? []).forEach((p, i) => {
    out.push({ panel: p, path: `panels[${i}]`, nested: false });
    if (p && p.type === 'row' && Array.isArray(p.panels)) {
      p.panels.forEach((q, j) => out.push({ panel: q, path: `panels[${i}].panels[${j}]`, nested: true }));
    }
  });
  return out;
}

/** Visits every value of a JSON tree with its path. */
function walk(value, p, visit) {
  visit(value, p);
  if (Array.isArray(value)) value.forEach((v, i) => walk(v, `${p}[${i}]`, visit));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) walk(v, p ? `${p}.${k}` : k, visit);
  }
}

const isInt = (n) => Number.isInteger(n);

// ---------------------------------------------------------------- 1. types

function typeScriptSource(dashboard) {
  const used = new Set();
  const consts = [];
  for (const { panel, path: p } of allPanels(dashboard)) {
    if (!panel || typeof panel !== 'object' || panel.type === 'row') continue;
    if (!(panel.type in PANEL_TYPES)) continue; // reported by the sanity checks
    used.add(panel.type);
    consts.push({ path: p, type: `Panel_${ident(panel.type)}`, value: panel });
  }
  const lines = [
    `import type { Dashboard, Panel, FieldConfig, FieldConfigSource } from '@grafana/schema';`,
    `import type { Dataquery } from '@grafana/grafana-foundation-sdk/prometheus';`,
  ];
  for (const t of used) {
    const [dir, mod] = PANEL_TYPES[t];
    lines.push(`import type * as ${ident(t)} from '@grafana/schema/dist/esm/raw/composable/${dir}/panelcfg/x/${mod}_types.gen';`);
  }
  lines.push(
    '',
    '// A JSON document of T: string enums as the union of their values, no methods.',
    'type IsMethod<V> = [V] extends [never] ? false : V extends (...args: any[]) => any ? true : false;',
    'type Json<T> = 0 extends 1 & T ? any',
    '  : T extends string ? (string extends T ? string : `${T}`)',
    '  : T extends number | boolean | null | undefined ? T',
    '  : T extends (...args: any[]) => any ? never',
    '  : T extends ReadonlyArray<infer U> ? Array<Json<U>>',
    '  : T extends object ? { [K in keyof T as IsMethod<T[K]> extends true ? never : K]: Json<T[K]> }',
    '  : T;',
    `type PromQuery = Json<Dataquery>;`,
    `type StrictPanel<Type extends string, Options, Custom> = Json<Omit<Panel, 'type' | 'options' | 'fieldConfig' | 'targets'>> & {`,
    `  type: Type;`,
    `  options: Json<Options>;`,
    `  fieldConfig: {`,
    `    defaults: Json<Omit<FieldConfig, 'custom'>> & { custom?: Json<Custom> };`,
    `    overrides: Json<FieldConfigSource['overrides']>;`,
    `  };`,
    `  targets?: PromQuery[];`,
    `};`,
  );
  for (const t of used) {
    const [, , custom] = PANEL_TYPES[t];
    const n = ident(t);
    lines.push(`type Panel_${n} = StrictPanel<'${t}', ${n}.Options, ${custom ? `${n}.FieldConfig` : 'Record<string, never>'}>;`);
  }
  lines.push('');
  const spans = []; // [start offset, end offset, JSON path prefix]
  let text = lines.join('\n') + '\n';
  const add = (name, type, value, prefix) => {
    const head = `// ${prefix || '(dashboard)'}\nexport const ${name}: ${type} = `;
    const start = text.length + head.length;
    text += head + JSON.stringify(value, null, 2);
    spans.push([start, text.length, prefix]);
    text += ';\n\n';
  };
  consts.forEach((c, i) => add(`panel${i}`, c.type, c.value, c.path));
  add('dashboard', 'Json<Dashboard>', dashboard, '');
  return { text, spans };
}

function ident(s) {
  return s.replace(/[^A-Za-z0-9]/g, '_');
}

/** The JSON path of the node at `pos` inside the literal that starts at `start`. */
function jsonPathAt(sourceFile, pos, start, prefix) {
  let node = findNode(sourceFile, pos);
  const parts = [];
  while (node && node.pos >= start - 1) {
    const parent = node.parent;
    if (!parent) break;
    if (ts.isPropertyAssignment(parent) && parent.initializer === node) parts.unshift(`.${parent.name.text}`);
    else if (ts.isPropertyAssignment(node) && parts.length === 0) parts.unshift(`.${node.name.text}`);
    else if (ts.isArrayLiteralExpression(parent)) parts.unshift(`[${parent.elements.indexOf(node)}]`);
    if (ts.isVariableDeclaration(parent)) break;
    node = parent;
  }
  const tail = parts.join('');
  return prefix ? prefix + tail : tail.replace(/^\./, '') || '(dashboard)';
}

function findNode(node, pos) {
  let found = node;
  const visit = (n) => {
    if (pos >= n.getStart() && pos < n.getEnd()) {
      found = n;
      ts.forEachChild(n, visit);
    }
  };
  ts.forEachChild(node, visit);
  return found;
}

function typeCheck(dashboard) {
  const { text, spans } = typeScriptSource(dashboard);
  if (printTs) console.log(text);
  const fileName = path.join(here, '__dashboard_check__.ts');
  const options = {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const sourceFile = ts.createSourceFile(fileName, text, ts.ScriptTarget.ES2022, true);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (f, ...rest) => (path.resolve(f) === fileName ? sourceFile : getSourceFile.call(host, f, ...rest));
  host.fileExists = (f) => path.resolve(f) === fileName || fileExists.call(host, f);
  host.readFile = (f) => (path.resolve(f) === fileName ? text : readFile.call(host, f));
  const program = ts.createProgram([fileName], options, host);
  const diagnostics = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...program.getSyntacticDiagnostics(sourceFile),
    ...program.getSemanticDiagnostics(sourceFile),
  ];
  const errors = [];
  const seen = new Set();
  for (const d of diagnostics) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n    ');
    if (d.file !== sourceFile || d.start === undefined) {
      errors.push(`TypeScript: ${message}`);
      continue;
    }
    const span = spans.find(([s, e]) => d.start >= s && d.start < e);
    if (!span) {
      // an error in the header: a type of the packages moved or vanished
      const { line } = sourceFile.getLineAndCharacterOfPosition(d.start);
      errors.push(`TypeScript (generated line ${line + 1}, run with --print-ts): TS${d.code}: ${message}`);
      continue;
    }
    const where = jsonPathAt(sourceFile, d.start, span[0], span[2]);
    // a panel is checked twice (loosely in the dashboard, strictly alone):
    // keep one report per place and error code
    const key = `${where} ${d.code}`;
    if (seen.has(key)) continue;
    seen.add(key);
    errors.push(`${where}: TS${d.code}: ${message}`);
  }
  return errors;
}

// ---------------------------------------------------------------- 2. sanity

const BUILTIN_VARIABLE = /^__/; // $__rate_interval, $__interval, $__range, $__all, …

function sanity(dashboard) {
  const errors = [];
  if (dashboard.id !== null && dashboard.id !== undefined) {
    errors.push(`id: ${JSON.stringify(dashboard.id)}: must be null (or absent) so the dashboard imports as a new one`);
  }
  if ('__inputs' in dashboard) {
    errors.push('__inputs: present: Grafana would ask for a data source at import; use the datasource template variable instead');
  }
  if (!dashboard.uid) errors.push('uid: missing: links and alerts need a stable /d/<uid> URL');
  const variables = dashboard.templating?.list ?? [];
  const names = new Set(variables.map((v) => v.name));
  if (!variables.some((v) => v.name === 'datasource' && v.type === 'datasource')) {
    errors.push('templating.list: no variable "datasource" of type datasource, which the panels\' ${datasource} references need');
  }

  // datasource references, anywhere
  walk(dashboard, '', (value, p) => {
    if (!/(^|\.)datasource$/.test(p)) return;
    const ok = typeof value === 'string'
      ? value === DATASOURCE_VAR
      : value && typeof value === 'object' && value.uid === DATASOURCE_VAR;
    if (!ok) errors.push(`${p}: ${JSON.stringify(value)}: a datasource reference must be {"type": "prometheus", "uid": "${DATASOURCE_VAR}"}`);
  });
  variables.forEach((v, i) => {
    if (v.type === 'query' && !v.datasource) errors.push(`templating.list[${i}] (${v.name}): a query variable without datasource (must be ${DATASOURCE_VAR})`);
  });

  // variables used in queries, titles and variable queries must exist
  const checkVars = (text, p) => {
    if (typeof text !== 'string') return;
    for (const m of text.matchAll(/\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\]/g)) {
      const name = m[1] ?? m[2] ?? m[3];
      if (!BUILTIN_VARIABLE.test(name) && !names.has(name)) errors.push(`${p}: uses $${name}, which is not a template variable`);
    }
  };
  variables.forEach((v, i) => checkVars(typeof v.query === 'string' ? v.query : v.query?.query, `templating.list[${i}].query`));

  const panels = allPanels(dashboard);
  const ids = new Map();
  for (const { panel, path: p } of panels) {
    if (!panel || typeof panel !== 'object') {
      errors.push(`${p}: not an object`);
      continue;
    }
    const label = `${p} (${JSON.stringify(panel.title ?? '')})`;
    if (!isInt(panel.id) || panel.id <= 0) errors.push(`${label}.id: ${JSON.stringify(panel.id)}: must be a positive integer`);
    else if (ids.has(panel.id)) errors.push(`${label}.id: ${panel.id} is also the id of ${ids.get(panel.id)}`);
    else ids.set(panel.id, label);

    const g = panel.gridPos;
    if (!g || typeof g !== 'object') errors.push(`${label}.gridPos: missing`);
    else {
      for (const k of ['x', 'y', 'w', 'h']) {
        if (!isInt(g[k]) || g[k] < 0) errors.push(`${label}.gridPos.${k}: ${JSON.stringify(g[k])}: must be an integer ≥ 0`);
      }
      if (isInt(g.w) && g.w < 1) errors.push(`${label}.gridPos.w: must be at least 1`);
      if (isInt(g.h) && g.h < 1) errors.push(`${label}.gridPos.h: must be at least 1`);
      if (isInt(g.x) && isInt(g.w) && g.x + g.w > GRID_COLUMNS) {
        errors.push(`${label}.gridPos: x ${g.x} + w ${g.w} = ${g.x + g.w}: past the ${GRID_COLUMNS} columns of the grid`);
      }
    }
    checkVars(panel.title, `${label}.title`);
    if (panel.type === 'row') continue;
    if (!(panel.type in PANEL_TYPES)) {
      errors.push(`${label}.type: ${JSON.stringify(panel.type)}: no schema known for this panel type (known: ${Object.keys(PANEL_TYPES).join(', ')})`);
    }
    if (NO_QUERY.has(panel.type)) continue;
    if (!panel.datasource) errors.push(`${label}.datasource: missing (must be ${DATASOURCE_VAR})`);
    if (!Array.isArray(panel.targets) || panel.targets.length === 0) {
      errors.push(`${label}.targets: a ${panel.type} panel without queries`);
      continue;
    }
    const refIds = new Set();
    panel.targets.forEach((t, i) => {
      const tp = `${label}.targets[${i}]`;
      if (typeof t?.expr !== 'string' || t.expr.trim() === '') errors.push(`${tp}.expr: missing or empty`);
      else checkVars(t.expr, `${tp}.expr`);
      if (typeof t?.refId !== 'string' || t.refId === '') errors.push(`${tp}.refId: missing or empty`);
      else if (refIds.has(t.refId)) errors.push(`${tp}.refId: ${t.refId} is used twice in this panel`);
      else refIds.add(t.refId);
    });
  }

  // no two laid-out panels may overlap (rows take a whole line)
  const laidOut = panels
    .filter(({ nested, panel }) => !nested && panel?.gridPos && ['x', 'y', 'w', 'h'].every((k) => isInt(panel.gridPos[k])))
    .map(({ panel, path: p }) => ({ label: `${p} (${JSON.stringify(panel.title ?? '')})`, ...panel.gridPos }));
  for (let i = 0; i < laidOut.length; i++) {
    for (let j = i + 1; j < laidOut.length; j++) {
      const a = laidOut[i];
      const b = laidOut[j];
      if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) {
        errors.push(`${b.label}.gridPos overlaps ${a.label}`);
      }
    }
  }
  return errors;
}

// ---------------------------------------------------------------- 3. metrics

const PROMQL_WORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan', 'Inf', 'NaN']);

/** Metric names a PromQL expression selects (a lexical approximation, enough for these dashboards). */
function metricNames(expr) {
  let s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set();
  for (const m of s.matchAll(/(?<![\w$.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?/g)) {
    if (m[2] || PROMQL_WORDS.has(m[1])) continue;
    names.add(m[1]);
  }
  for (const m of expr.matchAll(/__name__\s*=\s*"([^"]+)"/g)) names.add(m[1]);
  return names;
}

function loadMetrics(file) {
  const names = new Set();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    let m = line.match(/^# TYPE ([A-Za-z_:][A-Za-z0-9_:]*) (\w+)/);
    if (m) {
      names.add(m[1]);
      if (m[2] === 'histogram' || m[2] === 'summary') ['_bucket', '_sum', '_count'].forEach((x) => names.add(m[1] + x));
      continue;
    }
    m = line.match(/^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]/);
    if (m) names.add(m[1]);
  }
  return names;
}

function metricCheck(dashboard, known) {
  const errors = [];
  for (const { panel, path: p } of allPanels(dashboard)) {
    (panel?.targets ?? []).forEach((t, i) => {
      if (typeof t?.expr !== 'string') return;
      for (const name of metricNames(t.expr)) {
        if (!known.has(name)) errors.push(`${p}.targets[${i}].expr: metric ${name} is not in the scrape`);
      }
    });
  }
  (dashboard.templating?.list ?? []).forEach((v, i) => {
    const q = typeof v.query === 'string' ? v.query : v.query?.query;
    if (v.type !== 'query' || typeof q !== 'string') return;
    const inner = q.match(/^\s*(?:label_values|query_result)\((.*)\)\s*$/s);
    const selector = inner ? inner[1].replace(/,\s*[A-Za-z_][A-Za-z0-9_]*\s*$/, '') : q;
    for (const name of metricNames(selector)) {
      if (!known.has(name)) errors.push(`templating.list[${i}].query: metric ${name} is not in the scrape`);
    }
  });
  return errors;
}

/** The `expr`s of a Prometheus rule file, with the rule each belongs to. */
function ruleExprs(text) {
  const lines = text.split('\n');
  const out = [];
  let rule = '?';
  for (let i = 0; i < lines.length; i++) {
    const named = lines[i].match(/^\s*(?:-\s+)?(?:alert|record):\s*(\S+)/);
    if (named) rule = named[1];
    const m = lines[i].match(/^(\s*(?:-\s+)?)expr:\s*(.*?)\s*$/);
    if (!m) continue;
    const indent = m[1].length;
    let value = m[2];
    if (/^[|>][-+]?$/.test(value)) {
      const block = [];
      while (i + 1 < lines.length && (lines[i + 1].trim() === '' || lines[i + 1].search(/\S/) > indent)) block.push(lines[++i]);
      value = block.join('\n');
    } else if (/^'.*'$/.test(value)) value = value.slice(1, -1).replace(/''/g, "'");
    else if (/^".*"$/.test(value)) value = JSON.parse(value);
    out.push({ rule, expr: value });
  }
  return out;
}

function ruleMetricCheck(file, known) {
  const errors = [];
  const exprs = ruleExprs(fs.readFileSync(file, 'utf8'));
  if (exprs.length === 0) errors.push('no expr found');
  for (const { rule, expr } of exprs) {
    for (const name of metricNames(expr)) {
      if (!known.has(name)) errors.push(`${rule}: metric ${name} is not in the scrape`);
    }
  }
  return { errors, count: exprs.length };
}

// ---------------------------------------------------------------- main

let known = null;
if (metricFiles.length > 0) {
  known = new Set([...allowedMetrics, 'up']);
  for (const f of metricFiles) for (const n of loadMetrics(f)) known.add(n);
}

let failed = false;
for (const file of files) {
  let dashboard;
  try {
    dashboard = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    console.error(`FAIL ${file}: ${e.message}`);
    failed = true;
    continue;
  }
  if (!dashboard || typeof dashboard !== 'object' || Array.isArray(dashboard)) {
    console.error(`FAIL ${file}: not a JSON object`);
    failed = true;
    continue;
  }
  const errors = [
    ...typeCheck(dashboard).map((e) => `schema: ${e}`),
    ...sanity(dashboard).map((e) => `sanity: ${e}`),
    ...(known ? metricCheck(dashboard, known).map((e) => `metrics: ${e}`) : []),
  ];
  if (errors.length > 0) {
    failed = true;
    console.error(`FAIL ${file}: ${errors.length} error(s)`);
    for (const e of errors) console.error(`  ${e}`);
  } else {
    const panels = allPanels(dashboard).filter(({ panel }) => panel.type !== 'row');
    const targets = panels.reduce((n, { panel }) => n + (panel.targets?.length ?? 0), 0);
    console.log(
      `ok ${file}: ${panels.length} panels, ${targets} queries; conforms to @grafana/schema ${schemaVersion} ` +
        `(Dashboard, panel options) and @grafana/grafana-foundation-sdk ${sdkVersion} (Prometheus query)` +
        (known ? `; every metric is in ${metricFiles.join(', ')}` : ''),
    );
  }
}
for (const file of ruleFiles) {
  let result;
  try {
    result = ruleMetricCheck(file, known);
  } catch (e) {
    result = { errors: [e.message], count: 0 };
  }
  if (result.errors.length > 0) {
    failed = true;
    console.error(`FAIL ${file}: ${result.errors.length} error(s)`);
    for (const e of result.errors) console.error(`  metrics: ${e}`);
  } else {
    console.log(`ok ${file}: the metrics of its ${result.count} exprs are all in ${metricFiles.join(', ')}`);
  }
}
process.exit(failed ? 1 : 0);
