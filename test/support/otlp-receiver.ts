import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in OTLP/HTTP collector for tests: takes `POST /v1/traces` in either encoding the product
 * may send (OTLP JSON, or protobuf read by a small wire-format decoder: the exporter packages ship
 * an encoder only), and keeps every span it was sent.
 */

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  traceState: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  serviceName: string;
  /** The exporting process's resource attributes (`process.pid`, …). */
  resource: Record<string, string | number | boolean>;
  scopeName: string;
}

export const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const;

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Content types of the export requests received. */
  contentTypes: string[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const type = req.headers['content-type'] ?? '';
      contentTypes.push(type);
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      spans.push(
        ...(type.startsWith('application/json') ? fromJson(JSON.parse(body.toString('utf8'))) : fromProtobuf(body)),
      );
      res.writeHead(200, {
        'Content-Type': type.startsWith('application/json') ? 'application/json' : 'application/x-protobuf',
      });
      res.end(type.startsWith('application/json') ? '{}' : undefined);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    contentTypes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

// --- OTLP JSON (opentelemetry-proto's JSON mapping; ids are hex strings) ---

interface JsonKeyValue {
  key: string;
  value: { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, string | number | boolean> {
  const attributes: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    attributes[key] =
      value.stringValue ??
      (value.intValue !== undefined ? Number(value.intValue) : (value.boolValue ?? value.doubleValue ?? ''));
  }
  return attributes;
}

function fromJson(body: {
  resourceSpans?: Array<{
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: Array<{
      scope?: { name?: string };
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        traceState?: string;
        name: string;
        kind: number;
        attributes?: JsonKeyValue[];
        status?: { code?: number };
      }>;
    }>;
  }>;
}): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const resourceSpans of body.resourceSpans ?? []) {
    const resource = jsonAttributes(resourceSpans.resource?.attributes);
    const serviceName = String(resource['service.name'] ?? '');
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        out.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? '',
          traceState: span.traceState ?? '',
          name: span.name,
          kind: span.kind,
          attributes: jsonAttributes(span.attributes),
          statusCode: span.status?.code ?? 0,
          serviceName,
          resource,
          scopeName: scopeSpans.scope?.name ?? '',
        });
      }
    }
  }
  return out;
}

// --- OTLP protobuf (opentelemetry/proto/collector/trace/v1/trace_service.proto) ---

type Field = { wireType: 0; value: bigint } | { wireType: 1 | 5; value: Buffer } | { wireType: 2; value: Buffer };

/** The fields of one message by number, in order; enough of the wire format for OTLP. */
function decodeMessage(buffer: Buffer): Map<number, Field[]> {
  const fields = new Map<number, Field[]>();
  let offset = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buffer[offset++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (offset < buffer.length) {
    const tag = Number(varint());
    const number = tag >>> 3;
    const wireType = tag & 7;
    let field: Field;
    if (wireType === 0) field = { wireType, value: varint() };
    else if (wireType === 1 || wireType === 5) {
      const size = wireType === 1 ? 8 : 4;
      field = { wireType, value: buffer.subarray(offset, offset + size) };
      offset += size;
    } else if (wireType === 2) {
      const length = Number(varint());
      field = { wireType, value: buffer.subarray(offset, offset + length) };
      offset += length;
    } else throw new Error(`unsupported protobuf wire type ${wireType}`);
    if (!fields.has(number)) fields.set(number, []);
    fields.get(number)!.push(field);
  }
  return fields;
}

function bytesOf(fields: Map<number, Field[]>, number: number): Buffer {
  const field = fields.get(number)?.[0];
  return field && field.wireType === 2 ? field.value : Buffer.alloc(0);
}
function messagesOf(fields: Map<number, Field[]>, number: number): Array<Map<number, Field[]>> {
  return (fields.get(number) ?? []).map((field) => decodeMessage(field.value as Buffer));
}
function varintOf(fields: Map<number, Field[]>, number: number): number {
  const field = fields.get(number)?.[0];
  return field && field.wireType === 0 ? Number(field.value) : 0;
}

/** KeyValue { key = 1; AnyValue value = 2 }, AnyValue { string 1, bool 2, int 3, double 4 }. */
function protobufAttributes(keyValues: Array<Map<number, Field[]>>): Record<string, string | number | boolean> {
  const attributes: Record<string, string | number | boolean> = {};
  for (const keyValue of keyValues) {
    const key = bytesOf(keyValue, 1).toString('utf8');
    const value = messagesOf(keyValue, 2)[0] ?? new Map();
    if (value.has(1)) attributes[key] = bytesOf(value, 1).toString('utf8');
    else if (value.has(2)) attributes[key] = varintOf(value, 2) === 1;
    else if (value.has(3)) attributes[key] = varintOf(value, 3);
    else if (value.has(4)) attributes[key] = (value.get(4)![0]!.value as Buffer).readDoubleLE(0);
  }
  return attributes;
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  // ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1 }
  for (const resourceSpans of messagesOf(decodeMessage(body), 1)) {
    // ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2 }; Resource { attributes = 1 }
    const resource = messagesOf(resourceSpans, 1)[0] ?? new Map();
    const resourceAttributes = protobufAttributes(messagesOf(resource, 1));
    const serviceName = String(resourceAttributes['service.name'] ?? '');
    for (const scopeSpans of messagesOf(resourceSpans, 2)) {
      // ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2 }
      const scope = messagesOf(scopeSpans, 1)[0] ?? new Map();
      for (const span of messagesOf(scopeSpans, 2)) {
        // Span { trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6, attributes 9, status 15 { code 3 } }
        const status = messagesOf(span, 15)[0] ?? new Map();
        out.push({
          traceId: bytesOf(span, 1).toString('hex'),
          spanId: bytesOf(span, 2).toString('hex'),
          traceState: bytesOf(span, 3).toString('utf8'),
          parentSpanId: bytesOf(span, 4).toString('hex'),
          name: bytesOf(span, 5).toString('utf8'),
          kind: varintOf(span, 6),
          attributes: protobufAttributes(messagesOf(span, 9)),
          statusCode: varintOf(status, 3),
          serviceName,
          resource: resourceAttributes,
          scopeName: bytesOf(scope, 1).toString('utf8'),
        });
      }
    }
  }
  return out;
}
