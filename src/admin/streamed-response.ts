import type { Response } from 'express';

/** Writes a chunk, waiting while the client is slower than the export; false once the client is gone. */
export async function send(res: Response, chunk: string): Promise<boolean> {
  if (res.destroyed) return false;
  if (!res.write(chunk)) {
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }
  return !res.destroyed;
}
