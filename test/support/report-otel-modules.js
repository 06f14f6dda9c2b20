// Preloaded (`node -r`) into a product process by the tracing tests: on exit, says how many
// OpenTelemetry SDK modules the process loaded, so that "off loads no SDK" is checked, not assumed.
// @opentelemetry/api itself does not count: prom-client requires it (for exemplars) whatever we do,
// and without an SDK registered it is a set of no-op facades.
'use strict';
const path = require('node:path');

const OTEL = `${path.sep}@opentelemetry${path.sep}`;
const API = `${OTEL}api${path.sep}`;
process.on('exit', () => {
  const loaded = Object.keys(require.cache).filter((file) => file.includes(OTEL) && !file.includes(API));
  process.stderr.write(`loaded OpenTelemetry SDK modules: ${loaded.length}\n`);
});
