#!/usr/bin/env node
// Prints where a jest run's time went, from its --json report: the total of every suite's time,
// and the slowest suites. .ci/run prints it after each suite run (docs/testing.md).
//   node scripts/slowest-suites.js report.json [count]
'use strict';
const fs = require('node:fs');

const [file, count = '15'] = process.argv.slice(2);
if (!file) {
  console.error('usage: node scripts/slowest-suites.js report.json [count]');
  process.exit(2);
}
const report = JSON.parse(fs.readFileSync(file, 'utf8'));
const suites = report.testResults
  .map((suite) => ({ name: suite.name.replace(/^.*?\/test\//, 'test/'), seconds: (suite.endTime - suite.startTime) / 1000, status: suite.status }))
  .sort((a, b) => b.seconds - a.seconds);
const total = suites.reduce((sum, suite) => sum + suite.seconds, 0);
console.log(`${suites.length} suites, ${report.numTotalTests} tests; suite times add up to ${total.toFixed(0)} s (over the workers); the slowest:`);
for (const suite of suites.slice(0, Number(count))) {
  console.log(`  ${suite.seconds.toFixed(1).padStart(6)} s  ${suite.name}${suite.status === 'passed' ? '' : ` (${suite.status})`}`);
}
