import fs from 'node:fs';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import {
  TEST_SIGNING_SECRET,
  countPetRows,
  makeTempDir,
  spawnInventoryProcess,
  stopInventoryProcess,
  type InventoryProcess,
} from '../../support/inventory-harness';
import { jsonBody, sendToGateway, type GatewayReply } from './fake-upstreams';
import type { Pet } from '../../../src/inventory/pet';
import { eventually } from '../../support/eventually';

/**
 * The inventory as its own process (`src/inventory/main.ts`), the gateway in front of it. A stream
 * of POST /v1/pets goes through the gateway; the inventory is SIGKILLed in the middle of it and the
 * stream goes on for a while; then the inventory is started again on the same data dir and port.
 * Every pet the gateway acknowledged with 201 must be there, unchanged; every other answer must be
 * the contract's upstream error, never a 201 for a pet that was then lost.
 * (test/integration/inventory/persistence.test.ts does the same to the inventory alone.)
 */

const WRITERS = 4;
const ACKNOWLEDGED_BEFORE_KILL = 40;
const FAILED_AFTER_KILL = 40;
/** The codes each status may carry: 503 upstream_unavailable once the gateway's circuit breaker opens. */
const UPSTREAM_ERRORS = new Map([
  [502, ['upstream_unavailable']],
  [503, ['service_unavailable', 'upstream_unavailable']],
  [504, ['upstream_timeout']],
]);

describe.each(['undici', 'http-proxy'] as const)(
  'the inventory process crashes under a stream of writes through the gateway (upstream.forwarder = %s)',
  (forwarder) => {
    let dataDir: string;
    let inventory: InventoryProcess;
    let revived: InventoryProcess | null = null;
    let product: ProductHarness;
    let auth: string;

    beforeAll(async () => {
      dataDir = makeTempDir('inventory-crash');
      inventory = await spawnInventoryProcess({ dataDir });
      product = await startTestProduct({
        overrides: {
          upstream: { url: inventory.url, timeoutMs: 3000, forwarder },
          signing: { secret: TEST_SIGNING_SECRET },
        },
      });
      const { key } = await product.keyService.create({
        name: 'crash',
        plan: 'enterprise',
        limits: { perMinute: 100_000, perDay: 1_000_000 },
      });
      auth = `Bearer ${key}`;
    });

    afterAll(async () => {
      await product?.close();
      for (const proc of [inventory, revived]) if (proc) await stopInventoryProcess(proc, 'SIGKILL');
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    function postPet(name: string): Promise<GatewayReply> {
      return sendToGateway(`${product.gatewayUrl}/v1/pets`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name, categoryId: 5, status: 'pending' }),
      });
    }

    it('keeps every pet acknowledged with 201, answers the rest with 502/503/504 and the Error body, and serves again after a restart', async () => {
      const acknowledged: Array<{ pet: Pet; location: string | undefined }> = [];
      const refused: Array<{ status: number; code: unknown }> = [];
      const unexpected: Array<{ status: number; complete: boolean; body: string }> = [];
      let killed = false;
      let refusedAfterKill = 0;
      let stop = false;

      const writer = async (w: number) => {
        for (let i = 0; !stop; i++) {
          let reply: GatewayReply;
          try {
            reply = await postPet(`Crash ${w}-${i}`);
          } catch (err) {
            // The gateway never goes away; a failed connection to it is a finding.
            unexpected.push({ status: 0, complete: false, body: String(err) });
            continue;
          }
          if (reply.status === 201 && reply.complete) {
            acknowledged.push({ pet: jsonBody(reply) as Pet, location: reply.headers.location });
          } else if (UPSTREAM_ERRORS.has(reply.status) && reply.complete) {
            const body = jsonBody(reply) as { code?: unknown; status?: unknown; message?: unknown } | undefined;
            const shaped =
              UPSTREAM_ERRORS.get(reply.status)!.includes(body?.code as string) &&
              body?.status === reply.status &&
              typeof body?.message === 'string';
            const headed =
              reply.headers['x-ratelimit-limit'] !== undefined && reply.headers['x-request-id'] !== undefined;
            if (shaped && headed) {
              refused.push({ status: reply.status, code: body!.code });
              if (killed) refusedAfterKill++;
            } else {
              unexpected.push({ status: reply.status, complete: reply.complete, body: reply.body.toString('utf8') });
            }
          } else {
            unexpected.push({ status: reply.status, complete: reply.complete, body: reply.body.toString('utf8') });
          }
        }
      };
      const writers = Array.from({ length: WRITERS }, (_, w) => writer(w));

      await eventually(() => acknowledged.length >= ACKNOWLEDGED_BEFORE_KILL || unexpected.length > 0, {
        timeoutMs: 20_000,
        what: 'pets acknowledged before the kill',
      });
      const acknowledgedAtKill = acknowledged.length;
      inventory.child.kill('SIGKILL');
      killed = true;
      expect((await inventory.exited).signal).toBe('SIGKILL');
      // The stream goes on against the dead inventory for a while.
      await eventually(() => refusedAfterKill >= FAILED_AFTER_KILL || unexpected.length > 0, {
        timeoutMs: 20_000,
        what: 'refusals after the kill',
      });
      stop = true;
      await Promise.all(writers);
      const acknowledgedAfterKill = acknowledged.length - acknowledgedAtKill;

      expect(unexpected).toEqual([]);
      expect(refusedAfterKill).toBeGreaterThanOrEqual(FAILED_AFTER_KILL);
      // Nothing was acknowledged once the process was dead (a 201 racing the kill was sent before it).
      expect(acknowledgedAfterKill).toBeLessThanOrEqual(WRITERS);

      revived = await spawnInventoryProcess({ dataDir, port: inventory.port });
      await eventually(
        async () =>
          (await sendToGateway(`${product.gatewayUrl}/v1/pets?limit=1`, { headers: { authorization: auth } }))
            .status === 200,
        { timeoutMs: 20_000, what: 'the gateway serves again' },
      );

      const missing: Array<{ id: number; status: number; body: unknown }> = [];
      for (const { pet, location } of acknowledged) {
        expect(location).toBe(`/v1/pets/${pet.id}`);
        const found = await sendToGateway(`${product.gatewayUrl}/v1/pets/${pet.id}`, {
          headers: { authorization: auth },
        });
        const body = jsonBody(found);
        if (found.status !== 200 || JSON.stringify(body) !== JSON.stringify(pet))
          missing.push({ id: pet.id, status: found.status, body });
      }
      expect({ acknowledged: acknowledged.length, missing }).toEqual({
        acknowledged: acknowledged.length,
        missing: [],
      });

      // Rows on disk: every acknowledged pet, plus any whose insert committed as its answer was cut off.
      const rows = countPetRows(`${dataDir}/inventory.sqlite`);
      expect(rows).toBeGreaterThanOrEqual(acknowledged.length);
      expect(rows).toBeLessThanOrEqual(acknowledged.length + WRITERS);

      const after = await postPet('After the crash');
      expect(after.status).toBe(201);
      expect((jsonBody(after) as Pet).id).toBeGreaterThan(Math.max(...acknowledged.map((a) => a.pet.id)));

      const byStatus: Record<number, number> = {};
      for (const r of refused) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
      console.log(
        `inventory-crash (${forwarder}): ${acknowledged.length} acknowledged with 201 (${acknowledgedAtKill} before the kill, ${acknowledgedAfterKill} racing it), ` +
          `${refused.length} refused ${JSON.stringify(byStatus)}, ${rows} rows on disk after the restart, ${missing.length} missing`,
      );
    }, 60_000);
  },
);
