import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * A small tmpfs of its own, mounted by the test (root only, as CI runs): a real file system that
 * can be filled to the last byte and remounted read-only without touching the machine's disks.
 */
export interface Tmpfs {
  dir: string;
  /** Writes a file until the file system refuses even one more byte (ENOSPC); returns its path. */
  fill(): string;
  /** Bytes the file system still takes (statfs). */
  freeBytes(): number;
  remount(mode: 'ro' | 'rw'): void;
  /** Unmounts (lazily if something still holds a file) and removes the mount point. Safe to call twice. */
  unmount(): void;
}

export function mountTmpfs(label: string, sizeBytes: number): Tmpfs {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `asg-${label}-`));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes},mode=0755`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    fs.rmdirSync(dir);
    const reason = (err as { stderr?: Buffer }).stderr?.toString().trim() || (err as Error).message;
    throw new Error(`cannot mount a tmpfs for this test (it needs root and mount(8), as CI has): ${reason}`, {
      cause: err,
    });
  }
  let mounted = true;
  return {
    dir,
    fill() {
      const file = path.join(dir, 'filler');
      const fd = fs.openSync(file, 'a');
      try {
        for (const chunk of [Buffer.alloc(64 * 1024), Buffer.alloc(1)]) {
          for (;;) {
            try {
              fs.writeSync(fd, chunk);
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
              throw err;
            }
          }
        }
      } finally {
        fs.closeSync(fd);
      }
      return file;
    },
    freeBytes() {
      const stats = fs.statfsSync(dir);
      return stats.bavail * stats.bsize;
    },
    remount(mode) {
      execFileSync('mount', ['-o', `remount,${mode}`, dir], { stdio: 'pipe' });
    },
    unmount() {
      if (!mounted) return;
      mounted = false;
      try {
        execFileSync('umount', [dir], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      }
      fs.rmdirSync(dir);
    },
  };
}
