/**
 * Reading callgrind's output (`--tool=callgrind`, format version 1) and attributing its
 * instructions to named rows. Pure: text in, figures out (test/unit/bench/callgrind.test.ts).
 *
 * Callgrind names JIT code by address (`0x0000000028105e40`, object `???`): V8's perf map
 * (`node --perf-basic-prof`, /tmp/perf-<pid>.map) says which JS function each address belongs to.
 * V8's builtins, inline caches, runtime functions and the C++ they call have no row of their own:
 * their instructions are charged to their callers, split by each call's inclusive cost, up to the
 * nearest function that has a row (a JS function by its file, V8's garbage collector or compilers,
 * Node's HTTP parser, libuv).
 */

export interface CallgrindFunction {
  name: string;
  /** The object file (`ob=`): the node binary, libc, `???` for JIT code. */
  object: string;
  /** Instructions executed in the function itself. */
  self: number;
}

export interface CallgrindCall {
  caller: number;
  callee: number;
  count: number;
  /** Instructions executed in the call, everything below it included. */
  inclusive: number;
}

export interface CallgrindProfile {
  /** `totals:` (or the sum of the events when a file has none). */
  totals: number;
  functions: Map<number, CallgrindFunction>;
  calls: CallgrindCall[];
}

/** `totals:`/`summary:` of a callgrind file without reading the rest: the instructions it counted. */
export function callgrindTotals(text: string): number {
  const match = /^totals:\s+(\d+)/m.exec(text) ?? /^summary:\s+(\d+)/m.exec(text);
  if (!match) throw new Error('callgrind output without totals: or summary: (a dump cut short?)');
  return Number(match[1]);
}

/** `(12) name` or `(12)`: callgrind's name compression, one table per kind of name. */
function compressedName(value: string, table: Map<string, string>): string {
  const match = /^\((\d+)\)(?:\s+(.*))?$/.exec(value);
  if (!match) return value;
  if (match[2] !== undefined) table.set(match[1]!, match[2]);
  return table.get(match[1]!) ?? `(${match[1]})`;
}

/** Parses one callgrind output file: each function's self cost and every call edge, first event (Ir) only. */
export function parseCallgrind(text: string): CallgrindProfile {
  const objects = new Map<string, string>();
  const names = new Map<string, string>();
  const ids = new Map<string, number>();
  const functions = new Map<number, CallgrindFunction>();
  const calls: CallgrindCall[] = [];
  // A function is its name in its object: JIT addresses and C++ symbols are unique enough.
  const functionId = (name: string, object: string): number => {
    const key = `${object}\u0000${name}`;
    let id = ids.get(key);
    if (id === undefined) {
      id = ids.size;
      ids.set(key, id);
      functions.set(id, { name, object, self: 0 });
    }
    return id;
  };
  let object = '???';
  let current = -1;
  let calleeObject: string | null = null;
  let callee = -1;
  let pendingCall: { count: number } | null = null;
  let totals: number | null = null;
  let summed = 0;
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const first = line.charCodeAt(0);
    // Cost lines start with a position: a digit, +, - or *.
    if ((first >= 48 && first <= 57) || first === 43 || first === 45 || first === 42) {
      const space = line.indexOf(' ');
      const cost = space < 0 ? 0 : Number.parseInt(line.slice(space + 1), 10) || 0;
      if (pendingCall) {
        calls.push({ caller: current, callee, count: pendingCall.count, inclusive: cost });
        pendingCall = null;
      } else if (current >= 0) {
        functions.get(current)!.self += cost;
        summed += cost;
      }
      continue;
    }
    const equals = line.indexOf('=');
    const colon = line.indexOf(':');
    if (equals > 0 && (colon < 0 || equals < colon)) {
      const key = line.slice(0, equals);
      const value = line.slice(equals + 1);
      switch (key) {
        case 'ob':
          object = compressedName(value, objects);
          break;
        case 'fn':
          current = functionId(compressedName(value, names), object);
          calleeObject = null;
          break;
        case 'cob':
          calleeObject = compressedName(value, objects);
          break;
        case 'cfn':
        case 'cfi':
        case 'cfl':
          if (key === 'cfn') {
            callee = functionId(compressedName(value, names), calleeObject ?? object);
            calleeObject = null;
          }
          break;
        case 'calls':
          pendingCall = { count: Number.parseInt(value, 10) || 0 };
          break;
        default:
          // fl, fi, fe, jump, jcnd: files and jumps, not needed for costs by function.
          break;
      }
      continue;
    }
    const header = /^(totals|summary):\s+(\d+)/.exec(line);
    if (header?.[1] === 'totals') totals = Number(header[2]);
  }
  return { totals: totals ?? summed, functions, calls };
}

export interface PerfMapEntry {
  start: number;
  size: number;
  name: string;
  /** Its line in the map: of two entries holding one address (code freed, its space reused), the later is the live one. */
  order: number;
}

/** V8's perf map (`--perf-basic-prof`): `<start hex> <size hex> <name>` a line; returned sorted by start. */
export function parsePerfMap(text: string): PerfMapEntry[] {
  const entries: PerfMapEntry[] = [];
  for (const line of text.split('\n')) {
    const match = /^([0-9a-fA-F]+) ([0-9a-fA-F]+) (.*)$/.exec(line);
    if (match)
      entries.push({
        start: Number.parseInt(match[1]!, 16),
        size: Number.parseInt(match[2]!, 16),
        name: match[3]!,
        order: entries.length,
      });
  }
  return entries.sort((a, b) => a.start - b.start || a.order - b.order);
}

/** The entry holding an address (the latest written, when several do), or null. */
export function lookupPerfMap(
  entries: PerfMapEntry[],
  address: number,
  longest = longestEntry(entries),
): PerfMapEntry | null {
  let low = 0;
  let high = entries.length - 1;
  let last = -1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    if (entries[mid]!.start <= address) {
      last = mid;
      low = mid + 1;
    } else {
      high = mid - 1;
    }
  }
  let found: PerfMapEntry | null = null;
  // Every entry that starts within the longest entry's size below the address may hold it.
  for (let i = last; i >= 0 && entries[i]!.start > address - longest; i--) {
    const entry = entries[i]!;
    if (address < entry.start + entry.size && (!found || entry.order > found.order)) found = entry;
  }
  return found;
}

function longestEntry(entries: PerfMapEntry[]): number {
  return entries.reduce((max, e) => Math.max(max, e.size), 0);
}

/**
 * A row for a function, or null when its instructions go to its callers. `name` is the symbol, or
 * for JIT code the perf map's name (`JS:*handle /path/file.js:3:10`), `object` its object file.
 */
export type Classifier = (name: string, object: string) => string | null;

/** Where no caller has a row (a thread's root, a cycle of unnamed functions). */
export const UNATTRIBUTED = 'unattributed (no named caller)';

/**
 * Instructions by row: each function with a row keeps its own, the others' go to their callers,
 * split by the inclusive cost of each call, until a caller with a row is reached.
 */
export function attribute(
  profile: CallgrindProfile,
  classify: Classifier,
  resolveName: (fn: CallgrindFunction) => string = (fn) => fn.name,
): Map<string, number> {
  const rowOf = new Map<number, string | null>();
  for (const [id, fn] of profile.functions) rowOf.set(id, classify(resolveName(fn), fn.object));
  const callers = new Map<number, Array<{ caller: number; weight: number }>>();
  for (const call of profile.calls) {
    if (call.caller === call.callee || call.caller < 0) continue;
    const list = callers.get(call.callee) ?? [];
    // A call of no measured cost still says who calls: weigh it by its count, lightly.
    list.push({ caller: call.caller, weight: call.inclusive > 0 ? call.inclusive : call.count * 1e-6 });
    callers.set(call.callee, list);
  }
  const shares = new Map<number, Map<string, number>>();
  const inProgress = new Set<number>();
  const shareOf = (id: number): Map<string, number> => {
    const row = rowOf.get(id);
    if (row) return new Map([[row, 1]]);
    const known = shares.get(id);
    if (known) return known;
    const list = callers.get(id);
    if (!list || inProgress.has(id)) return new Map([[UNATTRIBUTED, 1]]);
    inProgress.add(id);
    const total = list.reduce((sum, c) => sum + c.weight, 0);
    const share = new Map<string, number>();
    for (const { caller, weight } of list) {
      for (const [name, part] of shareOf(caller)) share.set(name, (share.get(name) ?? 0) + (part * weight) / total);
    }
    inProgress.delete(id);
    shares.set(id, share);
    return share;
  };
  const rows = new Map<string, number>();
  for (const [id, fn] of profile.functions) {
    if (fn.self === 0) continue;
    for (const [name, part] of shareOf(id)) rows.set(name, (rows.get(name) ?? 0) + fn.self * part);
  }
  return rows;
}

/** JIT code's name from the perf map when callgrind knows it by address only. */
export function perfMapResolver(entries: PerfMapEntry[]): (fn: CallgrindFunction) => string {
  const longest = longestEntry(entries);
  return (fn) => {
    if (fn.object !== '???' || !/^0x[0-9a-f]+$/.test(fn.name)) return fn.name;
    return lookupPerfMap(entries, Number.parseInt(fn.name, 16), longest)?.name ?? fn.name;
  };
}
