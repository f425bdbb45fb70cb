import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";

const ZLocalSecrets = z.object({
  authSecret: z.string().optional(),
  encryptionKey: z.string().optional(),
  postgresPassword: z.string().optional(),
  redisPassword: z.string().optional(),
});
export type LocalSecrets = Required<z.output<typeof ZLocalSecrets>>;

/**
 * Secrets of a local installation, generated on first use into `<dataDir>/secrets.json` (mode 0600,
 * under the gitignored .data/). Values that already exist are never regenerated: the Postgres password
 * is baked into its data directory and the encryption key into stored credentials.
 */
export async function loadOrCreateLocalSecrets(dataDir: string): Promise<LocalSecrets> {
  const file = path.join(dataDir, "secrets.json");
  await mkdir(dataDir, { recursive: true });
  let current: z.output<typeof ZLocalSecrets> = {};
  try {
    current = ZLocalSecrets.parse(JSON.parse(await readFile(file, "utf8")));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
      throw new Error(`${file} is unreadable (${(error as Error).message}); fix or remove it`, {
        cause: error,
      });
    }
  }
  const secrets: LocalSecrets = {
    authSecret: current.authSecret ?? randomBytes(32).toString("base64url"),
    encryptionKey: current.encryptionKey ?? randomBytes(32).toString("base64"),
    postgresPassword: current.postgresPassword ?? randomBytes(24).toString("base64url"),
    redisPassword: current.redisPassword ?? randomBytes(24).toString("base64url"),
  };
  if (Object.keys(current).length !== Object.keys(secrets).length) {
    await writeFile(file, JSON.stringify(secrets, null, 2) + "\n", { mode: 0o600 });
  }
  // Also when the file pre-existed with looser permissions (e.g. restored from a backup).
  await chmod(file, 0o600);
  return secrets;
}

/** The local secrets if `npm start` generated them (the CLI reads, never creates, them). */
export async function readLocalSecrets(dataDir: string): Promise<Partial<LocalSecrets>> {
  try {
    return ZLocalSecrets.parse(JSON.parse(await readFile(path.join(dataDir, "secrets.json"), "utf8")));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw error;
  }
}
