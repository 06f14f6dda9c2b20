import type { Response } from 'express';

/** The header an admin write's answer carries on a replicated Redis: `true` or `false`. */
export const REPLICATED_HEADER = 'X-Replicated';

/**
 * After an admin write and before its answer and audit entry (CONTRACT §4: an admin write is
 * answered once Redis holds it, and on a replicated Redis the answer says whether a replica does).
 * `confirm` waits for a replica within its bound; `null` (no replica to wait for) adds nothing.
 * The audit entry's details get `replicated` as the answer's header says it.
 */
export function writeReplicationReport(confirm: () => Promise<boolean | null>) {
  return async (res: Response, details: Record<string, unknown>): Promise<Record<string, unknown>> => {
    const replicated = await confirm();
    if (replicated === null) return details;
    if (!res.headersSent) res.setHeader(REPLICATED_HEADER, String(replicated));
    return { ...details, replicated };
  };
}
