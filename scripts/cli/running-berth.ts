import path from "node:path";
import { findRunningServices } from "../services/running-services";
import { readLocalSecrets } from "../services/secrets";

const repoRoot = path.resolve(import.meta.dirname, "..", "..");

/** No DATABASE_URL and no running `npm start` to take it from: the CLI has nothing to act on. */
export class NothingRunningError extends Error {}

/**
 * The CLI's database and Redis: DATABASE_URL / REDIS_URL when set; otherwise those of the `npm start`
 * running on this data folder (BERTH_DATA_DIR, default `.data`), found in its services.json, with the
 * secrets it generated. Sets them in `env` for the services the commands call.
 */
export async function useRunningBerth(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  if (env.DATABASE_URL) return;
  const dataDir = path.resolve(env.BERTH_DATA_DIR || path.join(repoRoot, ".data"));
  const found = await findRunningServices(dataDir);
  if ("missing" in found) {
    throw new NothingRunningError(
      `DATABASE_URL is not set and no Berth is running on ${dataDir} (${found.missing}): ` +
        "start it with `npm start`, or set DATABASE_URL and REDIS_URL to the installation's services",
    );
  }
  env.DATABASE_URL = found.services.databaseUrl;
  env.REDIS_URL ||= found.services.redisUrl;
  const secrets = await readLocalSecrets(dataDir);
  if (secrets.authSecret) env.BERTH_AUTH_SECRET ||= secrets.authSecret;
  if (secrets.encryptionKey) env.BERTH_ENCRYPTION_KEY ||= secrets.encryptionKey;
}
