#!/usr/bin/env node
// Prints where a jest run's time went, from its --json report: the total of every suite's time,
// and the slowest suites. .ci/run prints it after each suite run (docs/testing.md).
// With --write, it also writes each suite's seconds to the file the test sequencer orders by
// (test/support/suite-durations.json: slowest first, so that the two workers end together).
//   node scripts/slowest-suites.js report.json [count] [--write durations.json]
'use strict';
const fs = require('node:fs');

const args = process.argv.slice(2);
const writeAt = args.indexOf('--write');
const durationsFile = writeAt === -1 ? undefined : args.splice(writeAt, 2)[1];
const [file, count = '15'] = args;
if (!file || (writeAt !== -1 && !durationsFile)) {
  console.error('usage: node scripts/slowest-suites.js report.json [count] [--write durations.json]');
  process.exit(2);
}
const report = JSON.parse(fs.readFileSync(file, 'utf8'));
const suites = report.testResults
  .map((suite) => ({
    name: suite.name.replace(/^.*?\/test\//, 'test/'),
    seconds: (suite.endTime - suite.startTime) / 1000,
    status: suite.status,
  }))
  .sort((a, b) => b.seconds - a.seconds);
const total = suites.reduce((sum, suite) => sum + suite.seconds, 0);
console.log(
  `${suites.length} suites, ${report.numTotalTests} tests; suite times add up to ${total.toFixed(0)} s (over the workers); the slowest:`,
);
for (const suite of suites.slice(0, Number(count))) {
  console.log(
    `  ${suite.seconds.toFixed(1).padStart(6)} s  ${suite.name}${suite.status === 'passed' ? '' : ` (${suite.status})`}`,
  );
}
if (durationsFile) {
  const seconds = Object.fromEntries(
    [...suites]
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((suite) => [suite.name, Math.round(suite.seconds * 10) / 10]),
  );
  fs.writeFileSync(durationsFile, `${JSON.stringify(seconds, null, 2)}\n`);
  console.log(`wrote ${suites.length} suites' seconds to ${durationsFile}`);
}
