import { readFileSync, rmSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";

/**
 * `<dataDir>/services.json`: where the running `npm start` keeps its database and Redis (the embedded ones
 * on free ports, or the given URLs) and the base URL it serves on (its PORT / BERTH_BASE_URL), so
 * `npm run berth` on the same machine reaches them, and prints links to it, without being told. Written (0600: the URLs hold passwords, like secrets.json beside it) once the migrations ran,
 * removed on a clean stop; a file whose process is gone (killed) is stale and says so.
 */
const ZRunningServices = z.object({
  pid: z.number().int().positive(),
  databaseUrl: z.string().min(1),
  redisUrl: z.string().min(1),
  // Optional: a record written before it was added still names the services.
  baseUrl: z.url().optional(),
  startedAt: z.string(),
});
export type RunningServices = z.output<typeof ZRunningServices>;

const fileIn = (dataDir: string) => path.join(dataDir, "services.json");

/** Records this process' services; the returned function removes the record (if still this process'). */
export async function recordRunningServices(
  dataDir: string,
  services: { databaseUrl: string; redisUrl: string; baseUrl: string },
): Promise<() => Promise<void>> {
  const record: RunningServices = {
    pid: process.pid,
    databaseUrl: services.databaseUrl,
    redisUrl: services.redisUrl,
    baseUrl: services.baseUrl,
    startedAt: new Date().toISOString(),
  };
  await writeFile(fileIn(dataDir), `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  const forget = () => {
    try {
      const current = ZRunningServices.safeParse(JSON.parse(readFileSync(fileIn(dataDir), "utf8")));
      if (current.success && current.data.pid === process.pid) rmSync(fileIn(dataDir), { force: true });
    } catch {
      // Gone already, or another process' record: nothing of ours to remove.
    }
  };
  // Every way out (a clean stop, a failed start, process.exit anywhere) forgets it; only a SIGKILL leaves
  // a stale record, which findRunningServices recognises by its dead process.
  process.once("exit", forget);
  return () => Promise.resolve(forget());
}

async function readRecord(dataDir: string): Promise<RunningServices | null> {
  try {
    return ZRunningServices.parse(JSON.parse(await readFile(fileIn(dataDir), "utf8")));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw new Error(`${fileIn(dataDir)} is unreadable (${(error as Error).message})`, { cause: error });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The running installation's services, or why there is none (no record, or its process is gone). */
export async function findRunningServices(
  dataDir: string,
): Promise<{ services: RunningServices } | { missing: string }> {
  const record = await readRecord(dataDir);
  if (!record) return { missing: `no ${fileIn(dataDir)}` };
  if (!isAlive(record.pid))
    return { missing: `${fileIn(dataDir)} names process ${record.pid}, which is not running (stale)` };
  return { services: record };
}
