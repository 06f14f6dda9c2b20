import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Fresh directories under the OS temp dir, all removed after the calling file's tests. Call at a
 * file's (or a describe's) top level: it registers the afterAll that cleans up.
 */
export function useTempDirs(prefix = 'asg-'): { tempDir(): string } {
  const made: string[] = [];
  afterAll(() => {
    for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
  });
  return {
    tempDir() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
      made.push(dir);
      return dir;
    },
  };
}
