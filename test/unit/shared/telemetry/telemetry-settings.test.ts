import { readTracingSettings } from '../../../../src/shared/telemetry/telemetry-settings';
import { tracingRequested } from '../../../../src/shared/telemetry/telemetry';

describe('tracingRequested: off unless an OTLP endpoint is set (CONTRACT §10)', () => {
  it.each([
    [{}, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }, true],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' }, false],
    [{ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }, false],
  ])('%j → %s', (env, expected) => {
    expect(tracingRequested(env)).toBe(expected);
  });
});

describe('readTracingSettings: the standard variables as the specification defines them', () => {
  it("defaults: http/protobuf, parentbased_always_on, the batch processor's own defaults", () => {
    expect(readTracingSettings({})).toEqual({
      settings: { protocol: 'http/protobuf', sampler: { kind: 'parentbased_always_on' }, batch: {} },
      problems: [],
    });
  });

  it('reads the protocol, the traces-specific variable first', () => {
    expect(readTracingSettings({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }).settings.protocol).toBe('http/json');
    expect(
      readTracingSettings({
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      }).settings.protocol,
    ).toBe('http/protobuf');
  });

  it.each([
    ['parentbased_traceidratio', '0.01', { kind: 'parentbased_traceidratio', ratio: 0.01 }],
    ['parentbased_traceidratio', undefined, { kind: 'parentbased_traceidratio', ratio: 1 }],
    ['traceidratio', '0', { kind: 'traceidratio', ratio: 0 }],
    ['always_off', undefined, { kind: 'always_off' }],
    ['parentbased_always_off', '0.5', { kind: 'parentbased_always_off' }],
  ])('sampler %s with arg %s', (sampler, arg, expected) => {
    const { settings, problems } = readTracingSettings({ OTEL_TRACES_SAMPLER: sampler, OTEL_TRACES_SAMPLER_ARG: arg });
    expect(problems).toEqual([]);
    expect(settings.sampler).toEqual(expected);
  });

  it('reads the batch span processor variables', () => {
    expect(
      readTracingSettings({
        OTEL_BSP_SCHEDULE_DELAY: '0',
        OTEL_BSP_MAX_QUEUE_SIZE: '4096',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '256',
        OTEL_BSP_EXPORT_TIMEOUT: '1000',
      }).settings.batch,
    ).toEqual({
      scheduledDelayMillis: 0,
      maxQueueSize: 4096,
      maxExportBatchSize: 256,
      exportTimeoutMillis: 1000,
    });
  });

  it('reports every bad value at once, each naming its variable', () => {
    const { problems } = readTracingSettings({
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '1.5',
      OTEL_BSP_SCHEDULE_DELAY: 'soon',
    });
    expect(problems).toEqual([
      'invalid setting OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not supported; use http/protobuf or http/json',
      'invalid setting OTEL_TRACES_SAMPLER_ARG: "1.5" is not a ratio from 0 to 1',
      'invalid setting OTEL_BSP_SCHEDULE_DELAY: "soon" is not a whole number of milliseconds',
    ]);
    expect(readTracingSettings({ OTEL_TRACES_SAMPLER: 'sometimes' }).problems).toEqual([
      'invalid setting OTEL_TRACES_SAMPLER: "sometimes" is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
    ]);
  });
});
