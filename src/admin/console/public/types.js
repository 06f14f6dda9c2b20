// @ts-check
// The admin API's answers and bodies as the console uses them; openapi-admin.yaml is the reference.
// Types only: the other modules import them in JSDoc (`import('./types.js').Key`), nothing at run time.

/**
 * @typedef {{ perMinute: number, perDay: number, perMonth?: number, maxInFlight?: number, hiddenWindows?: Array<'minute' | 'day' | 'month'> }} Limits
 * @typedef {{ name: string, perMinute: number | null, perDay: number | null, shadow: boolean }} Plan
 * @typedef {{ plans: Plan[] }} PlanList
 * @typedef {{
 *   id: string, name: string, plan: string, limits: Limits | null, createdAt: string,
 *   revokedAt: string | null, expiresAt: string | null, lastUsedAt: string | null, consumerId?: string | null,
 *   allowedOperations?: string[] | null, allowedAddresses?: string[] | null
 * }} Key
 * @typedef {{ limit: number, remaining: number, reset: number }} Window
 * @typedef {Window & { credits: number, startsAt: string }} MonthWindow
 * @typedef {Key & {
 *   usage: { minute: Window, day: Window, month?: MonthWindow }, bannedUntil: string | null, previousKeyExpiresAt: string | null,
 *   billingDay?: number
 * }} KeyDetail
 * @typedef {{ id: string, key: string, name: string, plan: string }} CreatedKey
 * @typedef {Key & { key: string, previousKeyExpiresAt: string | null }} RotatedKey
 * @typedef {{ date: string, admitted: number, rateLimited: number, banned: number }} UsageDay
 * @typedef {{ keyId: string, days: UsageDay[] }} KeyUsage
 * @typedef {{ at: string, action: string, keyId: string, details: Record<string, unknown> }} AuditEntry
 * @typedef {{ entries: AuditEntry[] }} AuditTrail
 * @typedef {Record<string, number>} Counts
 * @typedef {{ start: string, byStatus: Counts, byPlan: Counts, rejectionsByWindow: Counts }} StatsPoint
 * @typedef {{
 *   generatedAt: string, stepSeconds: number, points: StatsPoint[], activeBans: number | null,
 *   totals: { requests: number, byStatus: Counts, byPlan: Counts, rejectionsByWindow: Counts },
 *   health: Record<string, 'ok' | 'failing'>
 * }} StatsReport
 * @typedef {{ keyId: string, name: string | null, plan: string | null, count: number, lastCallAt: string }} Caller
 * @typedef {{ method: string, route: string, sunset: string, callers: Caller[] }} DeprecatedRoute
 * @typedef {{ lookbackDays: number, routes: DeprecatedRoute[] }} DeprecationReport
 * @typedef {{ at: string, result: 'success' | 'failure', trigger: string }} LastReload
 * @typedef {{ hash: string, lastReload: LastReload | null, config: Record<string, unknown> }} ConfigView
 * @typedef {{ keyId: string, name: string | null, consumerId: string | null, requests: number, rateLimited: number }} BusyKey
 * @typedef {{ keys: BusyKey[] }} TopKeys
 * @typedef {{ name: string, plan: string, limits?: Limits, expiresAt?: string }} NewKey
 * @typedef {{ perMinute?: number, perDay?: number, perMonth?: number, hiddenWindows?: Array<'minute' | 'day' | 'month'> }} ConsumerLimits
 * @typedef {{ id: string, name: string, limits: ConsumerLimits, billingDay: number, createdAt: string, updatedAt: string }} Consumer
 * @typedef {Consumer & { keyIds: string[], usage: { minute?: Window, day?: Window, month?: MonthWindow } }} ConsumerDetail
 * @typedef {{ name: string, limits?: ConsumerLimits }} NewConsumer
 * @typedef {'minute' | 'day' | 'month'} WindowName
 * @typedef {{ reset: Partial<Record<WindowName, { used: number, limit: number }>> }} WindowsReset
 * @typedef {{
 *   name: string, plan: string, expiresAt: string | null, limits?: Limits | null,
 *   allowedOperations?: string[] | null, allowedAddresses?: string[] | null
 * }} KeyChange
 */

export {};
