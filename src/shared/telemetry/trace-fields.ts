/**
 * What tracing's `logMixin` returns for a log line outside any sampled span: one shared object,
 * never written to, so the logger can tell it apart by identity and write such a line as it is.
 * A module of its own so that the logger and telemetry share it without importing each other.
 */
export const NO_TRACE_FIELDS: object = Object.freeze({});
