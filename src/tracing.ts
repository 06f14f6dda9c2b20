// Imported by src/main.ts before anything else of the product: the SDK (when an OTLP endpoint is
// set) is registered before the first logger, server or client exists.
import { startTracingOrExit } from './shared/telemetry/telemetry';
import { GATEWAY_SERVICE } from './shared/constants';

startTracingOrExit(GATEWAY_SERVICE);
