import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Issue 49: a Redis Cluster hash tag (`…:{id}…`) is built only where Redis names are: the limiter's in
 * src/limits/redis/ (redis-names.ts), the key stores' in src/keys/stores/, and outside src/limits the
 * Redis stores of other rooms (files named redis-*.ts). Anywhere else a hand-built name can read the
 * wrong windows without a word: callers pass a KeyRef and the store names it.
 */
const SRC = path.join(__dirname, '..', '..', '..', 'src');

/** A template `…:{${…`, a string ending in `:{` (a tag opened), or one starting with `}` added to another. */
const BUILDS_A_HASH_TAG = [/:\{\$\{/, /:\{['"`]/, /\+\s*['"`]\}/];

function mayNameRedisKeys(file: string): boolean {
  if (file.startsWith('limits/redis/') || file.startsWith('keys/stores/')) return true;
  return !file.startsWith('limits/') && path.basename(file).startsWith('redis-');
}

function sourceFiles(dir: string, under = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const relative = under === '' ? entry.name : `${under}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(path.join(dir, entry.name), relative);
    return entry.name.endsWith('.ts') ? [relative] : [];
  });
}

/** The lines of code that build a hash tag (comments left out: they may show a name's layout). */
function hashTagsBuilt(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line))
    .filter((line) => BUILDS_A_HASH_TAG.some((pattern) => pattern.test(line)))
    .map((line) => line.trim());
}

describe('Redis hash tags', () => {
  it('are built only in the Redis stores', () => {
    const outside = sourceFiles(SRC)
      .filter((file) => !mayNameRedisKeys(file))
      .flatMap((file) =>
        hashTagsBuilt(readFileSync(path.join(SRC, file), 'utf8')).map((line) => `src/${file}: ${line}`),
      );
    expect(outside).toEqual([]);
  });

  it('are seen however a name is put together', () => {
    expect(hashTagsBuilt('const key = `${namespace}:rl:{${keyId}}`;')).toHaveLength(1);
    expect(hashTagsBuilt('this.prefix = `${options.namespace}:rl:{`;')).toHaveLength(1);
    expect(hashTagsBuilt("const key = this.prefix + keyId + '}';")).toHaveLength(1);
    expect(hashTagsBuilt("return this.settings.prefix + consumerId + '}:c';")).toHaveLength(1);
    expect(hashTagsBuilt(' * one hash per API key, `${namespace}:rl:{${keyId}}`.')).toEqual([]);
    expect(hashTagsBuilt("return `{${entries.join(',')}}`;")).toEqual([]);
  });
});
