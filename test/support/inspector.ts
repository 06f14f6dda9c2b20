import { eventually } from './eventually';

/**
 * The live heap of a child process, read through its inspector (started with
 * `NODE_OPTIONS=--inspect=127.0.0.1:0`): a full garbage collection first, so that what is counted
 * is what the process still holds, not garbage that has not been collected yet. The product itself
 * has no hook for this; the test drives V8 from outside over the DevTools protocol.
 */

/** The inspector's WebSocket URL, once the child has printed it on stderr. */
export async function inspectorUrl(stderr: () => string, timeoutMs = 10_000): Promise<string> {
  const url = () => /Debugger listening on (ws:\/\/\S+)/.exec(stderr())?.[1];
  await eventually(() => url() !== undefined, { timeoutMs, what: () => `an inspector URL on stderr:\n${stderr()}` });
  return url()!;
}

/** Bytes the heap holds after two full collections (the second catches what the first freed up for). */
export async function retainedHeapBytes(url: string, timeoutMs = 10_000): Promise<number> {
  const socket = new WebSocket(url);
  let nextId = 1;
  const pending = new Map<number, (result: unknown) => void>();
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown };
    if (message.id !== undefined) pending.get(message.id)?.(message.result);
  });
  const call = (method: string) =>
    new Promise<unknown>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(
        () => reject(new Error(`inspector: ${method} did not answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      pending.set(id, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
      socket.send(JSON.stringify({ id, method }));
    });
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve(), { once: true });
    socket.addEventListener('error', () => reject(new Error(`inspector: cannot connect to ${url}`)), { once: true });
  });
  try {
    await call('HeapProfiler.collectGarbage');
    await call('HeapProfiler.collectGarbage');
    const usage = (await call('Runtime.getHeapUsage')) as { usedSize: number };
    return usage.usedSize;
  } finally {
    // A debugger still attached at exit would make the child wait for it to go.
    socket.close();
  }
}
