import Redis from 'ioredis';

/**
 * The commands clients sent a Redis server while `act` ran, as MONITOR shows them (name first,
 * lower-cased; commands a Lua script ran inside are left out, the script's own call is in). Counting
 * every command in INFO instead also counts the instances' background work (the usage flush every
 * 5 s, loss checks, issued-mark reads), which lands inside a short window now and then: a test
 * about what a request sends reads what names its keys here.
 */
export async function commandsDuring(redisUrl: string, act: () => Promise<unknown>): Promise<string[][]> {
  const client = new Redis(redisUrl, { lazyConnect: true });
  const monitor = await client.monitor();
  const marker = `commands-during-end-${process.pid}-${Date.now()}`;
  const commands: string[][] = [];
  const ended = new Promise<void>((resolve) => {
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source === 'lua') return;
      if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) resolve();
      else commands.push([args[0]?.toLowerCase() ?? '', ...args.slice(1)]);
    });
  });
  try {
    await act();
    await client.echo(marker);
    await ended;
    return commands;
  } finally {
    monitor.disconnect();
    client.disconnect();
  }
}

/** The commands that name a Redis key starting with `prefix` in any argument. */
export function naming(commands: string[][], prefix: string): string[][] {
  return commands.filter((command) => command.some((arg) => arg.startsWith(prefix)));
}
