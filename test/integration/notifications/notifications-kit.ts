import { startTestProduct, type ProductHarness, type ProductHarnessOptions } from '../../support/product-harness';
import type { WebhookReceiver } from '../../support/webhook-receiver';

export { startTestProduct, type ProductHarness };

/** Config `notifications` sending to these receivers (all events unless given). */
export function webhooksTo(
  receivers: Array<WebhookReceiver | { url: string; secret: string; events?: string[] }>,
  more: Record<string, unknown> = {},
) {
  return {
    notifications: {
      webhooks: receivers.map((r) => ({
        url: r.url,
        secret: r.secret,
        ...('events' in r && r.events ? { events: r.events } : {}),
      })),
      ...more,
    },
  };
}

/** A product whose webhooks go to `receivers`; other options as startTestProduct's. */
export function startWithWebhooks(
  receivers: Parameters<typeof webhooksTo>[0],
  options: ProductHarnessOptions & { notifications?: Record<string, unknown> } = {},
): Promise<ProductHarness> {
  const { notifications, ...rest } = options;
  return startTestProduct({ ...rest, overrides: { ...rest.overrides, ...webhooksTo(receivers, notifications) } });
}

/** gateway_webhook_deliveries_total{event,result} as this instance's /metrics says. */
export async function deliveriesCounted(product: ProductHarness, event: string, result: string): Promise<number> {
  const text = await (await fetch(new URL('/metrics', product.adminUrl))).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`gateway_webhook_deliveries_total{event="${event}",result="${result}"}`));
  return line === undefined ? Number.NaN : Number(line.split(' ').pop());
}

/** gateway_webhook_outbox_events as this instance's /metrics says (read from the outbox at scrape time). */
export async function outboxEvents(product: ProductHarness): Promise<number> {
  const text = await (await fetch(new URL('/metrics', product.adminUrl))).text();
  const line = text.split('\n').find((l) => l.startsWith('gateway_webhook_outbox_events '));
  return line === undefined ? Number.NaN : Number(line.split(' ').pop());
}

/** GET /v1/pets with the key; the status. */
export async function call(product: ProductHarness, key: string): Promise<number> {
  const res = await fetch(`${product.gatewayUrl}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}
