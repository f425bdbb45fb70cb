import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * Makes a real directory refuse new entries, as a read-only workdir does: chmod 0555 for an ordinary user;
 * root ignores modes, so as root the directory is made immutable (`chattr +i`, which binds root too).
 * Returns the undo (run it before removing the directory).
 */
export async function makeUnwritable(dir: string): Promise<() => Promise<void>> {
  if (process.getuid?.() !== 0) {
    await fs.chmod(dir, 0o555);
    return () => fs.chmod(dir, 0o755);
  }
  await run("chattr", ["+i", dir]);
  return async () => void (await run("chattr", ["-i", dir]));
}
