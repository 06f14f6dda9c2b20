import fs from 'node:fs';
import path from 'node:path';

/** The parts of a V8 .cpuprofile the summary reads. */
interface CpuProfile {
  nodes: Array<{ id: number; hitCount?: number; callFrame: { functionName: string; url: string; lineNumber: number } }>;
  startTime: number;
  endTime: number;
  samples: number[];
}

export interface HotFunction {
  function: string;
  where: string;
  selfPercent: number;
}

/** Self time per function, highest first: where the process spent its samples. */
export function hottestFunctions(file: string, repoRoot: string, top = 30): HotFunction[] {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const total = profile.samples.length;
  const byFunction = new Map<string, { fn: string; where: string; hits: number }>();
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url ? `${path.relative(repoRoot, url.replace(/^file:\/\//, ''))}:${lineNumber + 1}` : '(native)';
    const id = `${functionName}@${where}`;
    const entry = byFunction.get(id) ?? { fn: functionName || '(anonymous)', where, hits: 0 };
    entry.hits += hits;
    byFunction.set(id, entry);
  }
  return [...byFunction.values()]
    .sort((a, b) => b.hits - a.hits)
    .slice(0, top)
    .map((e) => ({ function: e.fn, where: e.where, selfPercent: (e.hits / total) * 100 }));
}

/** Self time per file or package: node_modules/<pkg>, node internals, or our own source. */
export function timeByModule(file: string, repoRoot: string): Array<{ module: string; selfPercent: number }> {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const total = profile.samples.length;
  const byModule = new Map<string, number>();
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0) continue;
    const url = node.callFrame.url.replace(/^file:\/\//, '');
    let module = url ? path.relative(repoRoot, url) : `(${node.callFrame.functionName || 'native'})`;
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(module);
    if (pkg) module = pkg[1]!;
    else if (url.startsWith('node:')) module = 'node internals';
    byModule.set(module, (byModule.get(module) ?? 0) + hits);
  }
  return [...byModule.entries()].sort((a, b) => b[1] - a[1]).map(([module, hits]) => ({ module, selfPercent: (hits / total) * 100 }));
}
