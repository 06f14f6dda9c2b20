// Imported by src/inventory/main.ts before anything else of the inventory (see src/tracing.ts).
import { startTracingOrExit } from '../shared/telemetry/telemetry';
import { INVENTORY_SERVICE } from '../shared/constants';

startTracingOrExit(INVENTORY_SERVICE);
