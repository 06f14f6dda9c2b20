import express from 'express';
import type { ConfigView, ReloadOutcome } from '../shared/config';

/** What GET /admin/config and POST /admin/reload need: the view in force and a way to reload. */
export interface ConfigAdministration {
  view(): ConfigView;
  /** Re-reads and validates the config and TLS files: the same as SIGHUP. */
  reload(trigger: string): Promise<ReloadOutcome>;
}

/** GET /config and POST /reload under the admin router (behind its token check). */
export function configRoutes(config: ConfigAdministration): express.Router {
  const router = express.Router();
  router.get('/config', (_req, res) => {
    res.json(config.view());
  });
  router.post('/reload', async (_req, res) => {
    const outcome = await config.reload('POST /admin/reload');
    if (outcome.result === 'success') res.json(outcome);
    else
      res
        .status(outcome.status)
        .json({ code: outcome.code, message: outcome.message, status: outcome.status, errors: outcome.errors });
  });
  return router;
}
