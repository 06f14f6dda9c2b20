import {
  attribute,
  callgrindTotals,
  lookupPerfMap,
  parseCallgrind,
  parsePerfMap,
  perfMapResolver,
  UNATTRIBUTED,
} from '../../../bench/callgrind';
import { classifyStep } from '../../../bench/instruction-steps';

// A callgrind dump as valgrind 3.19 writes it (name compression, relative positions, calls).
const DUMP = `# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  node server.js
part: 2

positions: line
events: Ir
summary: 1000

ob=(1) /usr/bin/node
fl=(1) ???
fn=(1) 0x0000000028100000
0 100
+2 20
cob=(1)
cfi=(1)
cfn=(2) Builtins_LoadIC
calls=3 0
0 300
cfn=(3) v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace)
calls=1 0
* 400

fn=(2)
0 250
cfn=(4) v8::internal::Object::GetProperty(v8::internal::LookupIterator*)
calls=2 0
0 50

fn=(4)
0 50

fn=(3)
0 400

ob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6
fl=(2) ???
fn=(5) start_thread
-1 180

totals: 1000
`;

describe("parseCallgrind: each function's own instructions and the calls between them", () => {
  it("sums a function's cost lines, leaving out the line after calls= (the call's inclusive cost)", () => {
    const profile = parseCallgrind(DUMP);
    const byName = new Map([...profile.functions.values()].map((fn) => [fn.name, fn]));
    expect(profile.totals).toBe(1000);
    expect(byName.get('0x0000000028100000')).toEqual({
      name: '0x0000000028100000',
      object: '/usr/bin/node',
      self: 120,
    });
    expect(byName.get('Builtins_LoadIC')!.self).toBe(250);
    expect(byName.get('start_thread')).toEqual({
      name: 'start_thread',
      object: '/usr/lib/x86_64-linux-gnu/libc.so.6',
      self: 180,
    });
    const selves = [...profile.functions.values()].reduce((sum, fn) => sum + fn.self, 0);
    expect(selves).toBe(1000);
  });

  it('reads compressed names back by their number, and each call with its count and inclusive cost', () => {
    const profile = parseCallgrind(DUMP);
    const name = (id: number) => profile.functions.get(id)!.name;
    expect(profile.calls.map((c) => [name(c.caller), name(c.callee), c.count, c.inclusive])).toEqual([
      ['0x0000000028100000', 'Builtins_LoadIC', 3, 300],
      ['0x0000000028100000', 'v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace)', 1, 400],
      ['Builtins_LoadIC', 'v8::internal::Object::GetProperty(v8::internal::LookupIterator*)', 2, 50],
    ]);
  });

  it('takes the totals line without parsing the rest, and refuses a file without one', () => {
    expect(callgrindTotals(DUMP)).toBe(1000);
    expect(callgrindTotals('events: Ir\nsummary: 77\n')).toBe(77);
    expect(() => callgrindTotals('events: Ir\nfn=(1) main\n0 5\n')).toThrow(/without totals/);
  });
});

describe("parsePerfMap and lookupPerfMap: V8's names for JIT code addresses", () => {
  const map = parsePerfMap(
    [
      '280fff00 400 JS:*freed /app/old.js:1:1',
      '28100000 80 JS:*handle /app/dist-bench/src/gateway/handler.js:10:3',
      '28100100 40 JS:^emit node:events:450:43',
      'not a line',
      '28100000 20 JS:*later /app/x.js:1:1',
    ].join('\n'),
  );

  it('finds the entry holding an address, the latest written of those holding it, and nothing past them', () => {
    expect(lookupPerfMap(map, 0x28100010)!.name).toBe('JS:*later /app/x.js:1:1');
    expect(lookupPerfMap(map, 0x28100050)!.name).toBe('JS:*handle /app/dist-bench/src/gateway/handler.js:10:3');
    expect(lookupPerfMap(map, 0x2810013f)!.name).toBe('JS:^emit node:events:450:43');
    // Only the freed code's older, longer entry holds this address.
    expect(lookupPerfMap(map, 0x28100090)!.name).toBe('JS:*freed /app/old.js:1:1');
    expect(lookupPerfMap(map, 0x28100400)).toBeNull();
    expect(lookupPerfMap(map, 0x10)).toBeNull();
  });

  it('names JIT code (object ??? or an address) and leaves symbols as they are', () => {
    const resolve = perfMapResolver(map);
    expect(resolve({ name: '0x0000000028100104', object: '???', self: 1 })).toBe('JS:^emit node:events:450:43');
    expect(resolve({ name: 'Builtins_LoadIC', object: '/usr/bin/node', self: 1 })).toBe('Builtins_LoadIC');
    expect(resolve({ name: '0x0000000099999999', object: '???', self: 1 })).toBe('0x0000000099999999');
  });
});

describe('attribute: instructions by row, functions without a row charged to their callers', () => {
  it('charges a builtin to the JS function that called it and keeps GC on its own row', () => {
    const profile = parseCallgrind(DUMP);
    const rows = attribute(profile, (name) =>
      name.startsWith('0x') ? 'handler' : name.includes('Heap::') ? 'gc' : null,
    );
    // handler: its own 120 + LoadIC's 250 + GetProperty's 50 (called by LoadIC, called by handler).
    expect(rows.get('handler')).toBe(420);
    expect(rows.get('gc')).toBe(400);
    // start_thread has no row and no caller.
    expect(rows.get(UNATTRIBUTED)).toBe(180);
    expect([...rows.values()].reduce((a, b) => a + b, 0)).toBe(profile.totals);
  });

  it('splits a shared callee between its callers by the inclusive cost of each call', () => {
    const text = `events: Ir
fn=(1) a
0 10
cfn=(3) shared
calls=1 0
0 300
fn=(2) b
0 10
cfn=(3)
calls=9 0
0 100
fn=(3)
0 400
totals: 420
`;
    const rows = attribute(parseCallgrind(text), (name) => (name === 'shared' ? null : name));
    expect(rows.get('a')).toBeCloseTo(10 + 300, 6);
    expect(rows.get('b')).toBeCloseTo(10 + 100, 6);
  });

  it('ends a cycle of functions without a row as unattributed rather than looping', () => {
    const text = `events: Ir
fn=(1) x
0 5
cfn=(2) y
calls=1 0
0 5
fn=(2)
0 5
cfn=(1)
calls=1 0
0 5
totals: 10
`;
    const rows = attribute(parseCallgrind(text), () => null);
    expect(rows.get(UNATTRIBUTED)).toBe(10);
  });
});

describe("classifyStep: the per-step table's rows", () => {
  it('puts JS functions in rows by their file', () => {
    expect(classifyStep('JS:*forward /w/dist-bench/src/gateway/upstream/undici-forwarder.js:40:3', '???')).toMatch(
      /^forwarding/,
    );
    expect(classifyStep('JS:*write /w/node_modules/sonic-boom/index.js:200:1', '???')).toMatch(/^log line/);
    expect(classifyStep('JS:~request /w/node_modules/undici/lib/dispatcher/client.js:1:1', '???')).toMatch(/^undici/);
    expect(classifyStep('JS:^parserOnIncoming node:_http_server:1100:27', '???')).toMatch(/HTTP parser/);
    expect(classifyStep('JS:*_writeRaw node:_http_outgoing:400:19', '???')).toMatch(/HTTP writer/);
    expect(classifyStep('JS:*authenticate /w/dist-bench/src/gateway/steps/authenticate.js:9:1', '???')).toMatch(
      /^steps/,
    );
    expect(classifyStep('JS:*preHandler /w/node_modules/@fastify/rate-limit/index.js:1:1', '???')).toMatch(
      /^fastify plugins/,
    );
    // npm start's build: dist/ holds src/'s tree without the src/ level.
    expect(classifyStep('JS:*limitKey /w/dist/gateway/steps/limit-key.js:9:1', '???')).toMatch(/^steps/);
    expect(classifyStep('JS:*write /w/dist/gateway/request-log-line.js:9:1', '???')).toMatch(/^log line/);
    expect(classifyStep('JS:*countedSendCommand /w/dist-bench/bench/children/gateway.js:80:1', '???')).toMatch(
      /^bench harness/,
    );
  });

  it("gives V8's collector, its compilers, llhttp and libuv rows of their own, and none to builtins", () => {
    expect(classifyStep('v8::internal::Heap::CollectGarbage(v8::internal::AllocationSpace)', '/n/node')).toMatch(
      /^garbage collector/,
    );
    expect(classifyStep('v8::internal::compiler::GraphReducer::ReduceTop()', '/n/node')).toMatch(/^V8 compilers/);
    expect(classifyStep('llhttp__internal__run', '/n/node')).toMatch(/HTTP parser/);
    expect(classifyStep('uv__io_poll', '/n/node')).toMatch(/^event loop/);
    expect(classifyStep('Builtins_LoadIC', '/n/node')).toBeNull();
    expect(classifyStep('0x0000000028100000', '???')).toMatch(/^JIT code not in the perf map/);
  });
});
