import path from "node:path";
import { findRunningServices } from "../services/running-services";
import { readLocalSecrets } from "../services/secrets";

const repoRoot = path.resolve(import.meta.dirname, "..", "..");

/** No DATABASE_URL and no running `npm start` to take it from: the CLI has nothing to act on. */
export class NothingRunningError extends Error {}

/** What the CLI learnt from the `npm start` running on its data folder, if any. */
export type RunningBerth = {
  /** The base URL that `npm start` serves on, as it recorded it (from its own PORT / BERTH_BASE_URL). */
  baseUrl?: string;
};

/**
 * The CLI's database and Redis: DATABASE_URL / REDIS_URL when set; otherwise those of the `npm start`
 * running on this data folder (BERTH_DATA_DIR, default `.data`), found in its services.json, with the
 * secrets it generated. Sets them in `env` for the services the commands call.
 */
export async function useRunningBerth(env: NodeJS.ProcessEnv = process.env): Promise<RunningBerth> {
  const dataDir = path.resolve(env.BERTH_DATA_DIR || path.join(repoRoot, ".data"));
  if (env.DATABASE_URL) return { baseUrl: await recordedBaseUrlOf(dataDir, env.DATABASE_URL) };
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
  return { baseUrl: found.services.baseUrl };
}

/** With DATABASE_URL given: the running `npm start`'s base URL only when it uses that same database. */
async function recordedBaseUrlOf(dataDir: string, databaseUrl: string): Promise<string | undefined> {
  try {
    const found = await findRunningServices(dataDir);
    return "services" in found && found.services.databaseUrl === databaseUrl
      ? found.services.baseUrl
      : undefined;
  } catch {
    // An unreadable record only loses the hint; the CLI does not need it to run.
    return undefined;
  }
}

/**
 * The base URL of the links the CLI prints (invitations): BERTH_BASE_URL when this shell sets it (the
 * operator's word); otherwise the one the running `npm start` recorded, since this shell may lack its PORT
 * (`PORT=3311 npm start` in another one); otherwise `fromConfig`, what a server with this environment uses.
 */
export function linkBaseUrl(
  running: RunningBerth,
  fromConfig: () => string,
  env: NodeJS.ProcessEnv = process.env,
): string {
  if (!env.BERTH_BASE_URL && running.baseUrl) return running.baseUrl.replace(/\/+$/, "");
  return fromConfig();
}
