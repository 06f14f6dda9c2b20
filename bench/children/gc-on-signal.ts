import fs from 'node:fs';
import path from 'node:path';

/**
 * Preloaded (`node --expose-gc -r .../gc-on-signal.js`) into every server `--instructions`
 * counts, workers of `WORKERS=2` included (cluster passes the supervisor's node flags on): on
 * SIGUSR2 a full garbage collection, then `<BENCH_GC_DIR>/<pid>.gc` holds how many so far. Each
 * counted repeat then starts from the same heap, so that a major collection falls into a repeat
 * by the requests it served, not by where the warm-up happened to leave the heap.
 */
const dir = process.env.BENCH_GC_DIR;
const collect = (globalThis as { gc?: () => void }).gc;
if (dir && collect) {
  let collections = 0;
  process.on('SIGUSR2', () => {
    collect();
    collections++;
    fs.writeFileSync(path.join(dir, `${process.pid}.gc`), String(collections));
  });
}
