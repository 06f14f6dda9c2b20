'use strict';
// Jest runs the slowest suites first so that two workers end together (a long suite started last
// keeps one worker busy alone at the end of the run). Jest's own sequencer knows each suite's time
// only from its cache, which a fresh clone (CI) does not have, so it falls back to file size and
// once started testssl.sh's scan last. Here a suite's time is the cache's when there is one, else
// the committed suite-durations.json (refreshed from a CI run's report: docs/testing.md). Suites in
// neither (new ones) still go first, as Jest's default does.
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;
const committedSeconds = require('./suite-durations.json');

const rootDir = path.resolve(__dirname, '..', '..');

class SlowestFirstSequencer extends Sequencer {
  time(test) {
    const cached = super.time(test);
    if (cached != null) return cached;
    const seconds = committedSeconds[path.relative(rootDir, test.path).split(path.sep).join('/')];
    return seconds == null ? undefined : seconds * 1000;
  }
}

module.exports = SlowestFirstSequencer;
