/**
 * Imported first by every entry point, before anything that needs Node 24 is loaded: on an older
 * Node (the machine's own, when `node dist/main.js` is run by hand instead of `npm start`) the
 * process stops with one line that says what to do, instead of failing somewhere inside a
 * dependency. package.json's engines names the versions the suite runs on (24 and 26).
 */
export const OLDEST_SUPPORTED_MAJOR = 24;

/** The one-line refusal for a Node older than OLDEST_SUPPORTED_MAJOR, or null. */
export function unsupportedRuntimeMessage(version: string): string | null {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  if (major >= OLDEST_SUPPORTED_MAJOR) return null;
  return (
    `animal-store-gateway: Node ${version} is not supported; it needs Node ${OLDEST_SUPPORTED_MAJOR} or newer. ` +
    'Run it through npm (npm start, npm run keys, npm run start:inventory), which uses the Node 24 that npm ci installs in node_modules.'
  );
}

const refusal = unsupportedRuntimeMessage(process.version);
if (refusal) {
  process.stderr.write(`${refusal}\n`);
  process.exit(1);
}

export const nodeVersion = process.version;
