// Scores one run of the suite with --requirements REVISION -o DIR, for
// conformance/run.sh's full targets:
//
//   node score.mjs DIR REVISION "EXPECTED FAILURES" [TABLE.md]
//
// It reads the server scenarios the revision's requirement set runs (the
// scored ones and those run unscored, extensions aside: tasks are optional
// by definition) from the pinned suite's requirements/REVISION.yaml. A
// scenario passes when every check it emitted is SUCCESS or INFO: a
// WARNING, a SKIPPED or a missing result counts as a failure, as the
// input-required targets count them. Exits 1 unless exactly the expected
// scenarios fail: one that passes while expected to fail is reported too,
// so that the list only shrinks.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const YAML = require('yaml');
const [dir, revision, expectedList = '', table] = process.argv.slice(2);
const suite = join(import.meta.dirname, 'node_modules/@modelcontextprotocol/conformance');
const req = YAML.parse(readFileSync(join(suite, 'requirements', `${revision}.yaml`), 'utf8'));
const scenarios = [
  ...req.server,
  ...(req.not_scored ?? []).filter((e) => e.leg === 'server' && e.reason !== 'extension').map((e) => e.scenario)
];
const expected = new Set(expectedList.split(/\s+/).filter(Boolean));
for (const s of expected) {
  if (!scenarios.includes(s)) {
    console.error(`conformance: expected failure ${s} is not a scenario of ${revision}`);
    process.exit(2);
  }
}

// Each scenario's results are in DIR/server-SCENARIO-TIMESTAMP/checks.json.
const dirs = readdirSync(dir);
let passed = 0, failed = 0, unexpected = 0;
let md = '| scenario | checks passed | result |\n|---|---|---|\n';
for (const s of scenarios) {
  const d = dirs.find((x) => x.startsWith(`server-${s}-`) && /^\d{4}-\d\d-\d\dT/.test(x.slice(`server-${s}-`.length)));
  let checks = [];
  if (d) checks = JSON.parse(readFileSync(join(dir, d, 'checks.json'), 'utf8'));
  const bad = checks.filter((c) => c.status !== 'SUCCESS' && c.status !== 'INFO');
  const ok = d !== undefined && checks.length > 0 && bad.length === 0;
  let result;
  if (ok) {
    passed++;
    result = 'pass';
    if (expected.has(s)) { unexpected++; result = 'pass (expected to fail)'; }
  } else {
    failed++;
    result = expected.has(s) ? 'FAIL (expected)' : 'FAIL';
    if (!expected.has(s)) unexpected++;
  }
  const count = `${checks.length - bad.length}/${checks.length}`;
  console.log(`conformance: ${s}: ${d ? count : 'no result'} ${result}`);
  for (const c of bad) console.log(`  ${c.id}: ${c.status}${c.errorMessage ? ': ' + c.errorMessage : ''}`);
  md += `| \`${s}\` | ${d ? count : '-'} | ${result} |\n`;
}
if (table) writeFileSync(table, md);
console.log(`conformance: ${revision}: ${passed} passed, ${failed} failed of ${scenarios.length}` +
  (expected.size ? ` (expected to fail: ${[...expected].join(' ')})` : ''));
process.exit(unexpected === 0 ? 0 : 1);
