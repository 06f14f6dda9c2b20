import fs from 'node:fs';
import path from 'node:path';
import express from 'express';
import { sendError } from '../../shared/errors';

/**
 * Only this origin, no inline script or style, nothing framed: the page talks to the admin API on
 * its own origin and nothing else, so an injected string can neither run nor send data away.
 */
export const CONSOLE_SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; '),
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Cache-Control': 'no-cache',
};

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * The static files live in src/admin/console/public; a build has no copy unless the image puts one
 * beside it, so both places are looked at. The source folder is found from the package root, as
 * builds sit at different depths (dist/admin/console, and dist-bench/src/admin/console for the bench).
 */
export function consolePublicDir(moduleDir: string = __dirname): string {
  const candidates = [
    path.join(moduleDir, 'public'),
    path.join(packageRoot(moduleDir), 'src', 'admin', 'console', 'public'),
  ];
  const found = candidates.find((dir) => fs.existsSync(path.join(dir, 'index.html')));
  if (!found) throw new Error(`operator console files not found (looked in ${candidates.join(', ')})`);
  return found;
}

/** The nearest folder at or above `from` that holds a package.json (the repository, or the image's /app). */
function packageRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) return from;
  }
}

/** GET /console and its assets, read once at start: a handful of small files, no build step. */
export function consoleRouter(publicDir: string = consolePublicDir()): express.Router {
  const files = new Map<string, { body: Buffer; type: string }>();
  for (const name of fs.readdirSync(publicDir)) {
    const type = CONTENT_TYPES[path.extname(name)];
    if (type) files.set(name, { body: fs.readFileSync(path.join(publicDir, name)), type });
  }
  const router = express.Router({ strict: true });
  router.get('/{:file}', (req, res) => {
    const name = (req.params as { file?: string }).file ?? 'index.html';
    const file = files.get(name);
    res.set(CONSOLE_SECURITY_HEADERS);
    if (!file) {
      sendError(res, 'not_found', 'No such resource.');
      return;
    }
    res.type(file.type).send(file.body);
  });
  return router;
}
