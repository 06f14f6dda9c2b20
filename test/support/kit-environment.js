/**
 * Jest's node environment, plus one thing the test kit needs: work to do once a test file is done,
 * after every afterAll of the file (`atFileEnd` in test/support/file-end.ts). Jest runs a file's
 * afterAll hooks in the order they are declared, so a fixture's own afterAll, declared at the top,
 * would stop a Redis before the file's afterAll closed its clients on it.
 */
const { TestEnvironment } = require('jest-environment-node');

const AT_FILE_END = '__asgAtFileEnd';

class KitEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.global[AT_FILE_END] = [];
  }

  async handleTestEvent(event) {
    if (event.name !== 'run_finish') return;
    const pending = this.global[AT_FILE_END].splice(0).reverse();
    for (const work of pending) {
      try {
        await work();
      } catch (err) {
        process.stderr.write(`test kit: work at the file's end failed: ${err && err.stack ? err.stack : err}\n`);
      }
    }
  }
}

module.exports = KitEnvironment;
