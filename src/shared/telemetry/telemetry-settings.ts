/**
 * The standard OTEL_* variables the product reads, as the OpenTelemetry specification defines them
 * (sdk-environment-variables, protocol/exporter). Parsed here, without the SDK, so that every bad
 * value is reported at once like the product's own settings (CONTRACT §2), rather than warned
 * about and silently replaced by a default.
 */

export type OtlpProtocol = 'http/protobuf' | 'http/json';

export type SamplerSetting =
  | { kind: 'always_on' | 'always_off' | 'parentbased_always_on' | 'parentbased_always_off' }
  | { kind: 'traceidratio' | 'parentbased_traceidratio'; ratio: number };

export interface BatchSettings {
  scheduledDelayMillis?: number;
  exportTimeoutMillis?: number;
  maxQueueSize?: number;
  maxExportBatchSize?: number;
}

export interface TracingSettings {
  protocol: OtlpProtocol;
  sampler: SamplerSetting;
  batch: BatchSettings;
}

const PROTOCOLS: readonly string[] = ['http/protobuf', 'http/json'];
const SAMPLERS: readonly string[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];
const BATCH_VARIABLES: ReadonlyArray<[string, keyof BatchSettings]> = [
  ['OTEL_BSP_SCHEDULE_DELAY', 'scheduledDelayMillis'],
  ['OTEL_BSP_EXPORT_TIMEOUT', 'exportTimeoutMillis'],
  ['OTEL_BSP_MAX_QUEUE_SIZE', 'maxQueueSize'],
  ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 'maxExportBatchSize'],
];

function setting(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

/** Reads the variables; throws nothing, returns every problem found. */
export function readTracingSettings(env: NodeJS.ProcessEnv): { settings: TracingSettings; problems: string[] } {
  const problems: string[] = [];

  // The traces-specific variable wins over the general one; the specification's default is http/protobuf.
  const protocolName = setting(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL')
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = setting(env, protocolName) ?? 'http/protobuf';
  if (!PROTOCOLS.includes(protocol)) {
    problems.push(`invalid setting ${protocolName}: "${protocol}" is not supported; use http/protobuf or http/json`);
  }

  const samplerName = setting(env, 'OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  let sampler: SamplerSetting = { kind: 'parentbased_always_on' };
  if (!SAMPLERS.includes(samplerName)) {
    problems.push(`invalid setting OTEL_TRACES_SAMPLER: "${samplerName}" is not one of ${SAMPLERS.join(', ')}`);
  } else if (samplerName === 'traceidratio' || samplerName === 'parentbased_traceidratio') {
    const arg = setting(env, 'OTEL_TRACES_SAMPLER_ARG');
    const ratio = arg === undefined ? 1 : Number(arg);
    if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
      problems.push(`invalid setting OTEL_TRACES_SAMPLER_ARG: "${arg}" is not a ratio from 0 to 1`);
    } else {
      sampler = { kind: samplerName, ratio };
    }
  } else {
    sampler = { kind: samplerName as 'always_on' };
  }

  const batch: BatchSettings = {};
  for (const [name, key] of BATCH_VARIABLES) {
    const raw = setting(env, name);
    if (raw === undefined) continue;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < (key === 'scheduledDelayMillis' ? 0 : 1)) {
      problems.push(
        `invalid setting ${name}: "${raw}" is not a whole number of ${key.endsWith('Millis') ? 'milliseconds' : 'spans'}`,
      );
    } else {
      batch[key] = value;
    }
  }

  return { settings: { protocol: protocol as OtlpProtocol, sampler, batch }, problems };
}
