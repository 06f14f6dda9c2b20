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
  return [...byModule.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([module, hits]) => ({ module, selfPercent: (hits / total) * 100 }));
}

interface ProfileNode {
  id: number;
  hitCount?: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number };
}

/** The request path's steps, by the name of the function each one is (src/gateway/handler.ts, steps/*). */
const STEP_FUNCTIONS = [
  'handleRequest',
  'startRequest',
  'serve',
  'answerPreflight',
  'matchOperation',
  'authenticate',
  'limitAnonymous',
  'answerUsage',
  'limitKey',
  'checkRoute',
  'applySunset',
  'forward',
  'onResponseStart',
  'onResponseData',
  'onResponseEnd',
  'recordRequest',
  'sendError',
];

export interface StepCost {
  step: string;
  /** CPU per request spent in the function and everything it called (inclusive), in µs. */
  micros: number;
}

/**
 * µs per request by step: each step function's inclusive time (itself and everything it calls,
 * summed over every stack it appears on, once per sample) divided by the requests served. What
 * runs outside any step (the socket's writes once a step has returned, GC, the parser) is the rest.
 */
export function stepCosts(
  file: string,
  requests: number,
): { steps: StepCost[]; totalMicros: number; sampledMicros: number } {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    nodes: ProfileNode[];
    samples: number[];
    startTime: number;
    endTime: number;
  };
  const microsPerSample = (profile.endTime - profile.startTime) / profile.samples.length;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const hits = new Map<string, number>();
  // Walk the tree with the set of step names on the stack, so recursion is counted once.
  const walk = (id: number, onStack: ReadonlySet<string>) => {
    const node = byId.get(id)!;
    const name = node.callFrame.functionName;
    const isStep = STEP_FUNCTIONS.includes(name) && node.callFrame.url.includes('/src/') ? name : null;
    const stack = isStep && !onStack.has(isStep) ? new Set([...onStack, isStep]) : onStack;
    for (const step of stack) hits.set(step, (hits.get(step) ?? 0) + (node.hitCount ?? 0));
    for (const child of node.children ?? []) walk(child, stack);
  };
  walk(profile.nodes[0]!.id, new Set());
  const busy = profile.nodes
    .filter((n) => n.callFrame.functionName !== '(idle)')
    .reduce((sum, n) => sum + (n.hitCount ?? 0), 0);
  return {
    steps: STEP_FUNCTIONS.filter((s) => hits.has(s)).map((step) => ({
      step,
      micros: (hits.get(step)! * microsPerSample) / requests,
    })),
    totalMicros: (busy * microsPerSample) / requests,
    // Every sample, idle ones included: what a module's share of samples is a share of.
    sampledMicros: (profile.samples.length * microsPerSample) / requests,
  };
}
