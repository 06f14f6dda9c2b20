import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_DB_COLLECTION_NAME,
  ATTR_DB_OPERATION_NAME,
  ATTR_DB_SYSTEM_NAME,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVICE_NAME,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import { createKeyScrubber } from '../redaction';
import { GATEWAY_SERVICE, INVENTORY_SERVICE } from '../constants';
import { readTracingSettings, type SamplerSetting } from './telemetry-settings';
import {
  NO_TRACE_FIELDS,
  TracingConfigError,
  type GatewayRequestOutcome,
  type GatewayRequestSpan,
  type GatewayStep,
  type SpanAttributes,
  type StepSpan,
  type Tracing,
} from './telemetry-types';

/**
 * The OpenTelemetry SDK behind the Tracing interface; loaded only when an OTLP endpoint is set.
 * Spans are made by hand at the few places that matter (no auto-instrumentation patches node:http,
 * Express or ioredis): the gateway's chain holds its state explicitly, so its spans are parented
 * explicitly, and the inventory's request span is made current so that SQLite statements find it.
 */

const SCOPE_VERSION = '1';
/** Our own attributes, beside the HTTP semantic conventions. None ever holds a key, key id or token. */
const ATTR_PLAN = 'asg.plan';
const ATTR_RATE_LIMIT = 'asg.rate_limit.decision';
const ATTR_ERROR_CODE = 'asg.error.code';
const ATTR_REFUSED = 'asg.refused';
const ATTR_STATEMENT = 'asg.sqlite.statement';

function samplerFor(setting: SamplerSetting): Sampler {
  switch (setting.kind) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(setting.ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(setting.ratio) });
  }
}

const NO_FIELDS: { trace_id?: string; span_id?: string } = Object.freeze({});
const NOOP_STEP: StepSpan = { end() {} };

class RecordedStep implements StepSpan {
  constructor(
    readonly span: Span,
    readonly context: Context,
  ) {}

  end(attributes?: SpanAttributes, failure?: string): void {
    if (attributes) this.span.setAttributes(attributes);
    if (failure) {
      this.span.setAttribute(ATTR_ERROR_TYPE, failure);
      this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.span.end();
  }
}

class GatewaySpan implements GatewayRequestSpan {
  private readonly context: Context;
  readonly recording: boolean;

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    parent: Context,
    private readonly method: string,
  ) {
    this.context = trace.setSpan(parent, span);
    this.recording = span.isRecording();
  }

  step(name: GatewayStep): StepSpan {
    // An unsampled request records nothing below it either; its traceparent still names a span.
    if (!this.recording) return NOOP_STEP;
    const kind = name === 'forward' ? SpanKind.CLIENT : SpanKind.INTERNAL;
    const attributes: Attributes | undefined =
      name === 'forward' ? { [ATTR_HTTP_REQUEST_METHOD]: this.method } : undefined;
    const span = this.tracer.startSpan(name, { kind, attributes }, this.context);
    return new RecordedStep(span, trace.setSpan(this.context, span));
  }

  propagate(headers: Record<string, unknown>, via: StepSpan): void {
    // The client's tracestate goes on only with its trace (kept in the span context): with an
    // invalid traceparent the request started a new trace, and W3C says its tracestate is dropped.
    delete headers.tracestate;
    propagation.inject(via instanceof RecordedStep ? via.context : this.context, headers);
  }

  run<T>(fn: () => T): T {
    return this.recording ? context.with(this.context, fn) : fn();
  }

  logFields(): { trace_id?: string; span_id?: string } {
    if (!this.recording) return NO_FIELDS;
    const { traceId, spanId } = this.span.spanContext();
    return { trace_id: traceId, span_id: spanId };
  }

  end(outcome: GatewayRequestOutcome): void {
    if (this.recording) {
      const span = this.span;
      span.updateName(`${this.method} ${outcome.route}`);
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, outcome.statusCode);
      if (outcome.route !== 'unmatched') span.setAttribute(ATTR_HTTP_ROUTE, outcome.route);
      span.setAttribute(ATTR_CLIENT_ADDRESS, outcome.clientAddress);
      span.setAttribute(ATTR_PLAN, outcome.plan);
      if (outcome.rateLimit) span.setAttribute(ATTR_RATE_LIMIT, outcome.rateLimit);
      if (outcome.refusal) {
        span.setAttribute(ATTR_ERROR_CODE, outcome.refusal);
        // 401 and 429 are the gateway doing its job, not failures; marked so they can be searched for.
        if (outcome.statusCode === 401 || outcome.statusCode === 429) span.setAttribute(ATTR_REFUSED, true);
      }
      // HTTP semantic conventions: on a SERVER span only 5xx is an error.
      if (outcome.statusCode >= 500) {
        span.setAttribute(ATTR_ERROR_TYPE, String(outcome.statusCode));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
    }
    this.span.end();
  }
}

/** Span attributes leave the process too: a key pasted into a path or a user agent is blanked. */
const { scrubString: scrubKeyLookalikes } = createKeyScrubber();

function serverAttributes(req: IncomingMessage, path: string): Attributes {
  const attributes: Attributes = {
    [ATTR_HTTP_REQUEST_METHOD]: req.method ?? 'GET',
    [ATTR_URL_PATH]: scrubKeyLookalikes(path),
    [ATTR_URL_SCHEME]: 'http',
    [ATTR_NETWORK_PROTOCOL_VERSION]: req.httpVersion,
  };
  const userAgent = req.headers['user-agent'];
  if (userAgent) attributes[ATTR_USER_AGENT_ORIGINAL] = scrubKeyLookalikes(userAgent);
  return attributes;
}

function pathOf(url: string | undefined): string {
  if (!url) return '/';
  const end = url.search(/[?#]/);
  return end === -1 ? url : url.slice(0, end);
}

/** The provider the settings ask for, registered globally (context manager, propagator, provider). */
function registerProvider(
  settings: ReturnType<typeof readTracingSettings>['settings'],
  defaultServiceName: string,
): TracerProvider {
  // Endpoint, headers, timeout and compression come from OTEL_EXPORTER_OTLP_[TRACES_]* as the exporters read them.
  const exporter: SpanExporter =
    settings.protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtobufExporter();
  const resource = defaultResource()
    // process.pid tells apart the workers of one WORKERS > 1 process, which all export.
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: defaultServiceName, 'process.pid': process.pid }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new TracerProvider({
    resource,
    sampler: samplerFor(settings.sampler),
    spanProcessors: [new BatchSpanProcessor({ exporter, ...settings.batch })],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return provider;
}

/** Builds the SDK from the environment and registers it globally. */
export function createSdkTracing(env: NodeJS.ProcessEnv, defaultServiceName: string): Tracing {
  const { settings, problems } = readTracingSettings(env);
  if (problems.length > 0) throw new TracingConfigError(problems);
  const provider = registerProvider(settings, defaultServiceName);

  const gatewayTracer = provider.getTracer(GATEWAY_SERVICE, SCOPE_VERSION);
  const inventoryTracer = provider.getTracer(INVENTORY_SERVICE, SCOPE_VERSION);

  return {
    startGatewayRequest(req) {
      const parent = propagation.extract(ROOT_CONTEXT, req.headers);
      const method = req.method ?? 'GET';
      const span = gatewayTracer.startSpan(method, { kind: SpanKind.SERVER }, parent);
      // Attributes only for what is recorded: at a ratio of 0.01 most requests build none.
      if (span.isRecording()) span.setAttributes(serverAttributes(req, pathOf(req.url)));
      return new GatewaySpan(gatewayTracer, span, parent, method);
    },

    inventoryMiddleware(routeOf) {
      return (req, res, next) => {
        const parent = propagation.extract(ROOT_CONTEXT, req.headers);
        // Mounted on the API's base path, where express has cut req.url; originalUrl is the whole target.
        const target = (req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url;
        const span = inventoryTracer.startSpan(req.method ?? 'GET', { kind: SpanKind.SERVER }, parent);
        if (!span.isRecording()) return next();
        span.setAttributes(serverAttributes(req, pathOf(target)));
        const current = trace.setSpan(parent, span);
        // Listeners added to req and res from here on (body chunks, 'finish', 'close') run with this
        // span current whichever async context emits their events, so that what runs after the
        // body is read (the route, its SQLite statement, the log line) still sees it.
        context.bind(current, req);
        context.bind(current, res);
        res.once('close', () => endInventorySpan(span, req, res, routeOf(res)));
        context.with(current, next);
      };
    },

    sqliteStatement(statement, run) {
      const parent = context.active();
      if (!trace.getSpan(parent)?.isRecording()) return run();
      const operation = statement.startsWith('insert') ? 'INSERT' : 'SELECT';
      const onPets = statement !== 'ping';
      const attributes: Attributes = {
        [ATTR_DB_SYSTEM_NAME]: 'sqlite',
        [ATTR_DB_OPERATION_NAME]: operation,
        [ATTR_STATEMENT]: statement,
      };
      if (onPets) attributes[ATTR_DB_COLLECTION_NAME] = 'pets';
      const span = inventoryTracer.startSpan(
        onPets ? `${operation} pets` : operation,
        { kind: SpanKind.CLIENT, attributes },
        parent,
      );
      try {
        return run();
      } catch (err) {
        span.setAttribute(ATTR_ERROR_TYPE, (err as { code?: string }).code ?? (err as Error).name ?? 'Error');
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw err;
      } finally {
        span.end();
      }
    },

    // The logger writes a line with NO_TRACE_FIELDS as it is, and copies any other line into the object returned.
    logMixin(mergeObject) {
      if ('trace_id' in mergeObject) return NO_TRACE_FIELDS;
      const span = trace.getSpan(context.active());
      if (!span?.isRecording()) return NO_TRACE_FIELDS;
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },

    shutdown: () => provider.shutdown(),
  };
}

function endInventorySpan(span: Span, req: IncomingMessage, res: ServerResponse, route: string): void {
  span.updateName(`${req.method ?? 'GET'} ${route}`);
  span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, res.statusCode);
  if (route !== 'unmatched') span.setAttribute(ATTR_HTTP_ROUTE, route);
  if (res.statusCode >= 500) {
    span.setAttribute(ATTR_ERROR_TYPE, String(res.statusCode));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}
