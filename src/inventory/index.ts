/** What the gateway's main and tests embed. */
export { createInventoryApp, type InventoryAppDeps } from './app';
export { openInventoryDatabase } from './database';
export { createInventoryMetrics, type InventoryMetrics, type InventoryMetricsOptions } from './metrics';
export { migrations } from './migrations';
export { SqlitePetRepository, type PetRepository, type ListPetsQuery, type QueryTimings } from './pet-repository';
export { startInventory, inventoryDatabasePath, type RunningInventory, type StartInventoryOptions } from './server';
export type { NewPet, Pet, PetStatus } from './pet';
export { VerifiedTokenCache } from './verified-token-cache';
