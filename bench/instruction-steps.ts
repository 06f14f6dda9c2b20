/**
 * The rows of the per-step instruction table (issue 51, part 2): which row a function's
 * instructions belong to, by its C++ symbol or, for JIT code, by the JS file the perf map names.
 * `null`: no row of its own, its instructions go to its callers (bench/callgrind.ts, attribute).
 * The same rows serve the gateway and the fastify peer, so that the two columns compare.
 */

export const STEP_ROWS = [
  'steps: auth, access, route, limits (src/gateway, src/keys, src/access, src/limits)',
  'rate-limit headers (src/gateway/rate-limit-headers, answer-usage)',
  'forwarding, gateway side (src/gateway/upstream, forward step, upstream token)',
  'log line (pino, sonic-boom, src logger and request-log-line)',
  'metrics (prom-client, metric tallies)',
  'Redis client (ioredis, its parser)',
  'undici (the client to the upstream)',
  'fastify (router, hooks, reply, its log calls)',
  'fastify plugins (rate-limit, reply-from)',
  "Node's HTTP parser (llhttp, _http_server, _http_incoming, _http_common)",
  "Node's HTTP writer (_http_outgoing)",
  'Node sockets and streams (net, stream internals, writev)',
  'promises, microtasks, timers',
  'crypto (hashes, HMAC)',
  'Node, other JS (events, diagnostics_channel, util, URL)',
  'other app JS (src/shared, src/product, ...)',
  'bench harness (its counters in the child)',
  'event loop (libuv, epoll)',
  'garbage collector (V8 heap)',
  'V8 compilers (Ignition, Sparkplug, Maglev, Turbofan, parser)',
  'JIT code not in the perf map',
] as const;

export type StepRow = (typeof STEP_ROWS)[number];

const row = (index: number): StepRow => STEP_ROWS[index]!;

/** JS files (the perf map's script path) to rows, first match wins. */
const JS_ROWS: Array<[RegExp, StepRow]> = [
  [/\/bench\//, row(16)],
  [/node_modules\/undici\//, row(6)],
  [/node_modules\/(ioredis|@ioredis|redis-parser|denque|cluster-key-slot|standard-as-callback|redis-errors)\//, row(5)],
  [
    /node_modules\/(pino|pino-std-serializers|sonic-boom|fast-redact|quick-format-unescaped|atomic-sleep|on-exit-leak-free|thread-stream|safe-stable-stringify|fast-safe-stringify)\//,
    row(3),
  ],
  [/node_modules\/(prom-client|tdigest|bintrees)\//, row(4)],
  [/node_modules\/@fastify\/(rate-limit|reply-from)\//, row(8)],
  [
    /node_modules\/(fastify|@fastify|find-my-way|avvio|light-my-request|fast-json-stringify|fast-querystring|fast-decode-uri-component|toad-cache|abstract-logging|process-warning|rfdc|secure-json-parse|fast-content-type-parse|json-schema-ref-resolver|fast-uri|ret|safe-regex2|tiny-lru|end-of-stream|pump)\//,
    row(7),
  ],
  // dist-bench/src/… (the bench's children) and dist/… (npm start: tsconfig.build's rootDir is src).
  [/\/(src|dist)\/shared\/(logger|redaction)\.js|\/(src|dist)\/gateway\/request-log-line\.js/, row(3)],
  [/\/(src|dist)\/shared\/metrics\/|\/(src|dist)\/shared\/(metrics|metric-tally|metric-labels)\.js/, row(4)],
  [/\/(src|dist)\/gateway\/(rate-limit-headers|steps\/answer-usage)\.js/, row(1)],
  [/\/(src|dist)\/gateway\/(upstream\/|steps\/forward\.js)|\/(src|dist)\/shared\/(http\/)?upstream-token\.js/, row(2)],
  [/\/(src|dist)\/(gateway|keys|access|limits|consumers)\//, row(0)],
  [/\/(src|dist)\//, row(15)],
  [/node:_http_(server|incoming|common)\b/, row(9)],
  [/node:_http_outgoing\b/, row(10)],
  [/node:(net|stream|internal\/stream_base_commons|internal\/streams\/|internal\/net)/, row(11)],
  [/node:internal\/(process\/task_queues|timers|async_hooks|process\/promises)|node:timers\b/, row(12)],
  [/node:(crypto|internal\/crypto\/)/, row(13)],
  [/node:/, row(14)],
  [/node_modules\//, row(15)],
];

/** C++ and C symbols with a row of their own (entry points: what they call goes with them). */
const NATIVE_ROWS: Array<[RegExp, StepRow]> = [
  [/^llhttp_|^node::(?:\(anonymous namespace\)::)?Parser::|^node::http_parser::/, row(9)],
  [/^uv_|^uv__|^epoll_|^__GI_epoll|^node::(?:PerIsolatePlatformData|NodePlatform)::|^node::SpinEventLoop/, row(17)],
  [
    /^v8::internal::(Heap|Scavenger|ScavengerCollector|MarkCompactCollector|MinorMarkSweepCollector|ConcurrentMarking|IncrementalMarking|MarkingBarrier|Sweeper|GCTracer|MemoryReducer|ArrayBufferSweeper|MemoryAllocator|ScavengeJob|MinorGCJob|IncrementalMarkingJob|GlobalHandles|TracedHandles|Evacuator|FullEvacuator|PagedSpace|SemiSpaceNewSpace|LocalHeap|HeapAllocator|MainAllocator)::|^cppgc::|^v8::internal::.*(Scaveng|Evacuat|MarkCompact|Marking)/,
    row(18),
  ],
  [
    /^v8::internal::(compiler::|maglev::|baseline::|turboshaft::|interpreter::BytecodeGenerator|Compiler::|Parser::|ParserBase|PreParser|Scanner::|OptimizingCompileDispatcher|Deoptimizer::|TurbofanCompilationJob|CompilationJob|OptimizedCompilationJob|UnoptimizedCompilationJob|BackgroundCompileTask|LazyCompileDispatcher|Zone::)/,
    row(19),
  ],
  [/^node::crypto::|^(EVP_|HMAC|SHA256|sha256_|ossl_|OPENSSL_|CRYPTO_)/, row(13)],
];

/** The row of a function, or null when its callers take its instructions. */
export function classifyStep(name: string, object: string): StepRow | null {
  if (name.startsWith('JS:') || name.startsWith('RegExp:')) {
    for (const [pattern, step] of JS_ROWS) if (pattern.test(name)) return step;
    return row(14);
  }
  if (object === '???' && /^0x[0-9a-f]+$/.test(name)) return row(20);
  for (const [pattern, step] of NATIVE_ROWS) if (pattern.test(name)) return step;
  return null;
}
