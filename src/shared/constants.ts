/** The names the two services go by in log lines, spans and traces. */
export const GATEWAY_SERVICE = 'animal-store-gateway';
export const INVENTORY_SERVICE = 'animal-store-inventory';
